# The lookups a swapped class runs: one moves the weight it reads, one reads
# only statistics.
from torch import nn


def onload_on_read(self, name):
    value = nn.Module.__getattr__(self, name)
    value.data = value.data.to("cuda", non_blocking=True)
    return value


def trace_reads(self, name):
    self.trace.append(name)
    return nn.Module.__getattr__(self, name)


class Streaming(nn.Linear):
    def __getattr__(self, name):
        value = super().__getattr__(name)
        if name in ("weight", "bias"):
            value.data = value.data.to("cuda", non_blocking=True)
        return value


class Rehoming(nn.Linear):
    # Its forward moves its own weights to the input's device in its body:
    # swapped in, it is the fence point.
    def forward(self, x):
        if self.weight.device != x.device:
            self.to(x.device)
        return super().forward(x)


class Following(nn.Linear):
    # Moves only the input to where the weight is: compute.
    def forward(self, x):
        return super().forward(x.to(self.weight.device))
