import torch

from pkg.engine import GatherEngine
from pkg.functions import FetchAndMatmul


class GatheredBlock(torch.nn.Module):
    def __init__(self, block, engine: GatherEngine):
        super().__init__()
        self.block = block
        self.engine = engine

    def forward(self, *args):
        self.engine.log("forward")
        self.engine.gather(self.block)
        # The gathered weights are used on the compute stream.
        torch.cuda.current_stream().wait_stream(self.engine.stream)
        out = self.block(*args)
        self.engine.release(self.block)
        return out


class OffloadedLinear(torch.nn.Module):
    def __init__(self, weight):
        super().__init__()
        self.weight = weight

    def forward(self, x):
        return FetchAndMatmul.apply(x, self.weight)
