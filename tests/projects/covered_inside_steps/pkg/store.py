"""A weight store of the project's own, no nn.Module: what the steps below
call moves its weights. Each method runs only inside one step."""

import torch


class Store:
    def load(self, state):
        self.w = state["w"]

    def fetch(self):
        self.w = self.w.cuda(non_blocking=True)

    def refetch(self):
        self.w = self.w.to("cuda", non_blocking=True)

    def fetch_again(self):
        self.w = self.w.cuda()

    def fetch_shallow(self):
        self.w = self.w.cuda()


class Streams:
    """Helpers of two steps. `Swapping._swap` calls `prefetch` and
    `drain`: its evidence goes through one of them, and the wait of
    `_wait_side` is a second effect it counts; every function on those
    chains runs only there, so each is covered."""

    def __init__(self):
        self.side = torch.cuda.Stream()

    def prefetch(self, block):
        self._upload(block)

    def _upload(self, block):
        block.w = block.w.cuda(non_blocking=True)

    def drain(self, block):
        self._wait_side()
        block.w = block.w.cpu()

    def _wait_side(self):
        torch.cuda.current_stream().wait_stream(self.side)


class LazyStreams(Streams):
    """Overrides `prefetch`: the step's chain goes through one of the two,
    yet both do the same work there (the same sign, through `_upload`), so
    both are covered."""

    def prefetch(self, block):
        if block.w.device.type != "cuda":
            self._upload(block)
