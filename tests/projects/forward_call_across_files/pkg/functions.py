import torch


def _fetch_weight(weight):
    weight.data = weight.data.to("cuda", non_blocking=True)


class FetchAndMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        _fetch_weight(weight)
        ctx.save_for_backward(x, weight)
        return x @ weight.t()

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        return grad @ weight, grad.t() @ x
