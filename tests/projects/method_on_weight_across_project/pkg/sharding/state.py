# What the sharding code attaches to each weight. No hook module imports
# this file: the class is set on the weights by `sharding/setup.py`.
import torch


class ShardState:
    def __init__(self, param):
        self.param = param

    def drop_full_copy(self):
        self.param.data = torch.empty(0, dtype=self.param.dtype, device=self.param.device)


class UsageLog:
    def note_release_of(self, module):
        for p in module.parameters():
            p.data = p.data.to("cpu")
