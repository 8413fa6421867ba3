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
    """Two helpers a step runs: the step's evidence goes through `prefetch`
    (the shorter chain), yet `drain` runs only there too, so it is covered
    as well: every effect a step counts names what runs inside it."""

    def __init__(self):
        self.side = torch.cuda.Stream()

    def prefetch(self, block):
        block.w = block.w.cuda(non_blocking=True)

    def drain(self, block):
        self._wait_side()
        block.w = block.w.cpu()

    def _wait_side(self):
        torch.cuda.current_stream().wait_stream(self.side)
