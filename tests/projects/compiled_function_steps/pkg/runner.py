import torch

from pkg.offload.manager import Streamer


class Runner:
    """No nn.Module: its `infer` is compiled where it is defined."""

    def __init__(self, offload):
        self.streamer = Streamer()
        if offload:
            self.run_blocks = self._run_offloaded
        else:
            self.run_blocks = self._run_resident

    @torch.compile(mode="max-autotune-no-cudagraphs")
    def infer(self, blocks, x):
        return self.run_blocks(blocks, x)

    @torch.compile
    def infer_evicting(self, blocks, x):
        for i in range(len(blocks)):
            self.streamer.evict(blocks, i)
            x = x * blocks[i].weight
        return x

    @torch.compile()
    def infer_spilling(self, blocks, x):
        for i in range(len(blocks)):
            self.streamer.spill(blocks, i)
            x = x * blocks[i].weight
        return x

    @torch._dynamo.optimize("inductor")
    def warm(self, blocks):
        self._warm_first(blocks)

    def _warm_first(self, blocks):
        self.streamer.prefetch(blocks, 0)

    def _run_offloaded(self, blocks, x):
        for i in range(len(blocks)):
            self.streamer.prefetch(blocks, i)
            x = x @ blocks[i].weight
        return x

    def _run_resident(self, blocks, x):
        for block in blocks:
            x = x @ block.weight.to(x.dtype)
        return x
