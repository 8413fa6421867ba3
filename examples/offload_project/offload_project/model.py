"""A toy model plus helpers that register plain nn.Module offload hooks."""
import torch
from torch import nn

from .hooks import ActivationStatsHook, CpuOffloadHook, add_hook
from .utils import count_parameters


class TinyModel(nn.Module):
    def __init__(self, width=64, depth=4):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.head(x)


def enable_offload(model, device="cuda"):
    def _onload(module, args):
        for param in module.parameters():
            param.data = param.data.to(device, non_blocking=True)
        return args

    for layer in model.layers:
        layer.register_forward_pre_hook(_onload)
    model.head.register_forward_hook(lambda m, a, out: m.to("cpu", non_blocking=True) and out)
    add_hook(model.head, CpuOffloadHook(device))
    add_hook(model.head, ActivationStatsHook())
    print(f"offloading {count_parameters(model)} parameters")
    return model
