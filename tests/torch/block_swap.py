"""Block swapping from backward hooks, as a block-swap trainer writes it.

tests/torch/run.sh copies this file into every tree (as
``hookfence_block_swap.py``) before hookfence rewrites it, so the tree built
with a strategy carries that strategy's fences on the two backward hooks and
the pristine tree none. compile_backward.py imports it from the tree under
test.

A trainer that keeps only some transformer blocks on the GPU moves a block's
weights in just before autograd needs them (``register_full_backward_pre_hook``)
and out again as soon as the block's gradients are done
(``register_full_backward_hook``). Here, on CPU, every move is a
real copy through ``.to(device, dtype, non_blocking=True, copy=True)``; each
block counts its hooks' calls, so a hook that is skipped or runs twice shows.
"""

import torch
from torch import nn

# Where a swapped block's weights live while it computes, and while it waits.
# On a GPU trainer these are torch.device("cuda") and torch.device("cpu");
# here both are the CPU, and ``copy=True`` makes every move a real copy.
# compile_backward.py's "cast" variant sets STORAGE_DTYPE to bfloat16.
EXECUTION_DEVICE = torch.device("cpu")
OFFLOAD_DEVICE = torch.device("cpu")
COMPUTE_DTYPE = torch.float32
STORAGE_DTYPE = torch.float32

def onload_before_backward(module, grad_output):
    # Autograd is about to run this block's backward: bring its weights in.
    module.swap_calls[0] += 1
    for param in module.parameters():
        param.data = param.data.to(EXECUTION_DEVICE, COMPUTE_DTYPE, non_blocking=True, copy=True)


def offload_after_backward(module, grad_input, grad_output):
    # This block's gradients are done: send its weights out again.
    module.swap_calls[1] += 1
    for param in module.parameters():
        param.data = param.data.to(OFFLOAD_DEVICE, STORAGE_DTYPE, non_blocking=True, copy=True)


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)
        # How often each hook ran on this block: [onload, offload]. A tensor,
        # not a Python counter, so that counting adds no guard of its own.
        self.register_buffer("swap_calls", torch.zeros(2, dtype=torch.int64))

    def forward(self, x):
        return x + torch.tanh(self.fc(x))


class SwapModel(nn.Module):
    def __init__(self, width=16, blocks=4):
        super().__init__()
        # An input layer, as a transformer's embedding: the first block's
        # input requires grad, so its full backward hook has a grad_input.
        self.embed = nn.Linear(width, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(blocks))
        self.head = nn.Linear(width, 4)

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def attach(model, swapped):
    """Swap the first ``swapped`` blocks during backward."""
    for index, block in enumerate(model.blocks):
        if index < swapped:
            block.register_full_backward_pre_hook(onload_before_backward)
            block.register_full_backward_hook(offload_after_backward)
    return model


def offload_swapped(model, swapped):
    """After the forward: the swapped blocks' weights leave the device (done
    eagerly by the trainer's offloader, outside the compiled model)."""
    with torch.no_grad():
        for block in model.blocks[:swapped]:
            for param in block.parameters():
                param.data = param.data.to(OFFLOAD_DEVICE, STORAGE_DTYPE, copy=True)


def onload_all(model):
    """Before the optimizer step and the next forward: every weight in."""
    with torch.no_grad():
        for param in model.parameters():
            param.data = param.data.to(EXECUTION_DEVICE, COMPUTE_DTYPE, copy=True)
