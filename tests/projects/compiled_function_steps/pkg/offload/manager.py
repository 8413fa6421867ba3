"""In a folder without `__init__.py` inside the package: imported as
`pkg.offload.manager` (a namespace package of `pkg`)."""
import torch


class Streamer:
    def __init__(self):
        self.active = [None, None]
        self.load_stream = torch.cuda.Stream()

    def prefetch(self, blocks, index):
        with torch.cuda.stream(self.load_stream):
            self.active[1] = blocks[index]
            self.active[1].load_async()

    def evict(self, blocks, index):
        self.active[0] = blocks[index]
        self.active[0].drop_async()

    def spill(self, blocks, index):
        self.active[0] = blocks[index]
        self.active[0].spill_async()
