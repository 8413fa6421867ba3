"""Weights kept outside any nn.Module: plain objects a runner streams."""


class BlockWeights:
    def load(self, state):
        self.weight = state["weight"]

    def load_async(self):
        self.weight = self.weight.cuda(non_blocking=True)

    def drop_async(self):
        self.weight = self.weight.cpu()


class Scratch:
    """A second class defining `drop_async`: a call of it on an object of
    unknown type may be either."""

    def drop_async(self):
        self.buffer = None
