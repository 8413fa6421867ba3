# The same with a "__class__" string that swaps nothing.
import torch
from helpers import move_params

SLOT = "__class__"


class Other(torch.nn.Module):
    def forward(self, x):
        move_params(self)
        return x
