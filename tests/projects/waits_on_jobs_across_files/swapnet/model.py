# A model whose forward waits for each block's weights before running it
# (through a subclass of the offloader defined in another module), and
# waits for a note job, which moves nothing.
import torch
from torch import nn

from .offloading import Offloader


class BlockOffloader(Offloader):
    def wait_for(self, idx):
        self._wait(idx)

    def noted(self, idx):
        self._note(idx)
        self._wait_note(idx)

    def schedule(self, idx):
        self._submit(idx, (idx + 1) % len(self.blocks))


class Stack(nn.Module):
    def __init__(self, blocks, device):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.offloader = BlockOffloader(self.blocks, device)

    def forward(self, x):
        x = x.to(self.offloader.device, non_blocking=True)
        for i, block in enumerate(self.blocks):
            self.offloader.wait_for(i)
            self.offloader.noted(i)
            x = block(x)
            self.offloader.schedule(i)
        return x
