"""A plain ``register_forward_pre_hook`` offload hook, as user code writes it.

tests/torch/run.sh copies this file into every tree (as
``hookfence_plain_hook.py``) before hookfence rewrites it, so the tree built
with a strategy carries that strategy's fence and the pristine tree none.
compile_offload.py imports it from the tree under test (case ``plain_tree``).
"""

import torch

EXECUTION_DEVICE = torch.device("cpu", 0)


def offload_pre_hook(module, args):
    # Reload every parameter from its CPU master copy onto the execution
    # device. On CPU, torch.device("cpu", 0) is not torch.device("cpu"), so
    # .to() copies on every call: the move path really runs.
    for name, param in module.named_parameters(recurse=False):
        param.data = module._hookfence_master[name].to(EXECUTION_DEVICE)


def attach(model):
    """Register the hook on every leaf module that has parameters."""
    for sub in model.modules():
        params = dict(sub.named_parameters(recurse=False))
        if params and not list(sub.children()):
            sub._hookfence_master = {n: p.detach().clone() for n, p in params.items()}
            sub.register_forward_pre_hook(offload_pre_hook)
    return model
