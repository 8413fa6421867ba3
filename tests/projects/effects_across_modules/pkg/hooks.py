# Pins: effects through helpers in another module, judged by what each hook
# hands them. Fenced: before_forward (gathers through ShardHandle.gather,
# whose object holds the parameters it was given), after_forward (frees the
# gathered storage through release), onload (moves the module through
# to_device). Left alone: free_scratch (frees a buffer it makes) and
# gather_activations (all-gathers its output).
import torch

from .storage import ShardHandle, all_gather_into, free_storage, to_device


def install(model):
    handle = ShardHandle(list(model.parameters()), "cuda")

    def before_forward(module, args):
        handle.gather()
        handle.wait()

    def after_forward(module, args, output):
        handle.release()
        return output

    model.register_forward_pre_hook(before_forward)
    model.register_forward_hook(after_forward)


def onload(module, args):
    to_device(module, "cuda")


def free_scratch(module, args):
    scratch = torch.empty(1 << 20, device="cuda")
    free_storage(scratch)


def gather_activations(module, args, output):
    full = torch.empty(output.numel() * 2, device=output.device)
    all_gather_into(full, output)
    return full


def attach(block):
    block.register_forward_pre_hook(onload)
    block.register_forward_pre_hook(free_scratch)
    block.register_forward_hook(gather_activations)
