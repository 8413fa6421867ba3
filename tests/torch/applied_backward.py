"""A forward hook that hands a helper an autograd Function and a closure the
Function keeps on `ctx` and calls at backward time (ZeRO's "gather before
backward"). hookfence lists the closure (`discovered_by: applied`) and the
hook, and fences both; the tier runs this file before and after `--apply`:
eager and `torch.compile` give the same gradients, the closure runs once per
backward, and with `--expect-fenced` the closure carries dynamo's marker."""
import sys

import torch

RAN = []


def each_tensor(owner, function_cls, at_backward, output):
    if isinstance(output, torch.Tensor):
        return function_cls.apply(owner, at_backward, output)
    return output


class CallAtBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, owner, callback, t):
        ctx.owner = owner
        ctx.callback = callback
        return t.detach()

    @staticmethod
    def backward(ctx, grad):
        ctx.callback(ctx.owner)
        return None, None, grad


def install(layer):
    def regather(submodule, inputs, output):
        def bring_back(mod):
            RAN.append(mod)
            for p in mod.parameters():
                p.data = p.data.to("cpu")

        RAN.append(bring_back)
        return each_tensor(submodule, CallAtBackward, bring_back, output)

    layer.register_forward_hook(regather)


def main():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    install(model[0])
    x = torch.randn(3, 4, requires_grad=True)
    model(x).sum().backward()
    eager = x.grad.clone()
    closures = [f for f in RAN if callable(f) and not isinstance(f, torch.nn.Module)]
    runs = sum(isinstance(m, torch.nn.Module) for m in RAN)
    assert runs == 1, RAN
    x.grad = None
    torch.compile(model)(x).sum().backward()
    assert torch.allclose(x.grad, eager), (x.grad, eager)
    assert sum(isinstance(m, torch.nn.Module) for m in RAN) == 2, RAN
    if "--expect-fenced" in sys.argv:
        marked = [getattr(f, "_torchdynamo_disable", False) for f in closures]
        assert marked and all(marked), "the closure run at backward is not fenced"
    print("ok", torch.__version__)


if __name__ == "__main__":
    main()
