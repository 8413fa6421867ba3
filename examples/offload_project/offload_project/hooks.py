"""Minimal accelerate-style hook machinery (no accelerate dependency)."""
import functools

import torch


class ModelHook:
    def pre_forward(self, module, *args, **kwargs):
        return args, kwargs

    def post_forward(self, module, output):
        return output


class CpuOffloadHook(ModelHook):
    """Keep weights on CPU; move them to the execution device only for forward."""

    def __init__(self, execution_device="cuda"):
        self.execution_device = torch.device(execution_device)

    def pre_forward(self, module, *args, **kwargs):
        module.to(self.execution_device)
        args = tuple(a.to(self.execution_device) if torch.is_tensor(a) else a for a in args)
        return args, kwargs

    def post_forward(self, module, output):
        module.to("cpu")
        return output


class PrefetchHook(ModelHook):
    def __init__(self, next_module, stream=None):
        self.next_module = next_module
        self.stream = stream

    @torch.compiler.disable()
    def pre_forward(self, module, *args, **kwargs):
        if self.stream is not None:
            torch.cuda.current_stream().wait_stream(self.stream)
        return args, kwargs

    def post_forward(self, module, output):
        if self.next_module is not None and self.stream is not None:
            with torch.cuda.stream(self.stream):
                self.next_module.to("cuda", non_blocking=True)
        return output


class ActivationStatsHook(ModelHook):
    def __init__(self):
        self.means = []

    def post_forward(self, module, output):
        self.means.append(output.float().mean().item())
        return output


def add_hook(module, hook):
    old_forward = module.forward

    @functools.wraps(old_forward)
    def new_forward(*args, **kwargs):
        args, kwargs = hook.pre_forward(module, *args, **kwargs)
        return hook.post_forward(module, old_forward(*args, **kwargs))

    module.forward = new_forward
    return module
