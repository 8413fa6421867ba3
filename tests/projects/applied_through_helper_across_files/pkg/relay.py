"""A helper that applies the Function it is handed to every tensor of an
output, handing the Function a function to call at backward time."""
import torch


def each_tensor(owner, function_cls, at_backward, outputs):
    if isinstance(outputs, (list, tuple)):
        return type(outputs)(each_tensor(owner, function_cls, at_backward, o) for o in outputs)
    if isinstance(outputs, torch.Tensor):
        return function_cls.apply(owner, at_backward, outputs)
    return outputs


def keep_only(owner, function_cls, at_backward, outputs):
    # Hands nothing on to a Function: `at_backward` is only stored.
    owner.pending = at_backward
    return outputs


class CallLater(torch.autograd.Function):
    @staticmethod
    def forward(ctx, owner, callback, t):
        ctx.owner = owner
        ctx.callback = callback
        return t.detach()

    @staticmethod
    def backward(ctx, *grads):
        ctx.callback(ctx.owner)
        return (None, None) + grads
