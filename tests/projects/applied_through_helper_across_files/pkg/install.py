import torch

from pkg.relay import CallLater, each_tensor, keep_only


def add_backward_gather(model, gather_all):
    for sub in model.modules():

        def before_backward(submodule, inputs, output):
            def gather_weights(mod):
                for prm in mod.parameters(recurse=False):
                    full = torch.empty(prm.numel() * 2, device="cuda")
                    torch.distributed.all_gather_into_tensor(full, prm.data)
                    prm.data = full

            return each_tensor(submodule, CallLater, gather_weights, output)

        def log_backward(submodule, inputs, output):
            def note(mod):
                mod.backward_seen = True

            return each_tensor(submodule, CallLater, note, output)

        def stash(submodule, inputs, output):
            def release(mod):
                for prm in mod.parameters():
                    prm.data = prm.data.to("cpu")

            return keep_only(submodule, CallLater, release, output)

        sub.register_forward_hook(before_backward)
        sub.register_forward_hook(log_backward)
        sub.register_forward_hook(stash)


def hook_on(sub, fn):
    # Registers what it is handed: the hooks below are found through it.
    return sub.register_forward_hook(fn)


def add_backward_reload(model):
    def reload_before_backward(submodule, inputs, output):
        def reload(mod):
            mod.to("cuda", non_blocking=True)

        return each_tensor(submodule, CallLater, reload, output)

    for sub in model.modules():
        hook_on(sub, reload_before_backward)
