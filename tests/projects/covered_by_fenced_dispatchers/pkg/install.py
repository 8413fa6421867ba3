# `enter` is fenced by its authors: `bring_in`, which only it calls, runs
# eagerly already (covered). `leave` moves weights through `send_back` and is
# fenced by the run: `send_back` is covered too. `refresh` is called by
# `leave` and by `again`, which a comment leaves alone: `refresh` gets a
# fence of its own. `quiet`, the only caller of `settle`, carries a
# commented-out decorator: `settle` keeps its own fence too.
import torch

from pkg.stages import DeviceStage


def install(model, device):
    stages = [DeviceStage(device)]

    @torch.compiler.disable()
    def enter(module, args):
        for stage in stages:
            stage.bring_in(module, *args)

    def leave(module, args, output):
        for stage in stages:
            stage.send_back(module, output)
            stage.refresh(module, output)

    # hookfence: ignore[runs once per step; measured]
    def again(module, args):
        for stage in stages:
            stage.refresh(module, *args)

    # @torch.compiler.disable()
    def quiet(module, args, output):
        for stage in stages:
            stage.settle(module, output)

    for sub in model.modules():
        sub.register_forward_pre_hook(enter)
        sub.register_forward_hook(leave)
        sub.register_forward_pre_hook(again)
        sub.register_forward_hook(quiet)
