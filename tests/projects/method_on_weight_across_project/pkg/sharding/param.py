# A weight class of the project: its own method gathers the full copy.
import torch


class GatheredParameter(torch.nn.Parameter):
    def gather_full(self):
        self.data = self.full_copy
