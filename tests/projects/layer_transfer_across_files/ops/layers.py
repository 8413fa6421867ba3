# Layers swapped in for torch's when a model is partly loaded: each
# derives from torch's layer through the project's own lineage and, with
# autocasting on, brings its weight to the input's device on every call.
import torch

from ops.cast import to_device
from ops.mixin import AutocastMixin


class BaseEmbedding(torch.nn.Embedding):
    pass


class AutocastEmbedding(BaseEmbedding, AutocastMixin):
    def _autocast_forward(self, ids):
        weight = to_device(self.weight, ids.device)
        return torch.nn.functional.embedding(ids, weight)

    def forward(self, ids):
        if getattr(self, "_autocast", False):
            return self._autocast_forward(ids)
        return super().forward(ids)


class AutocastGroupNorm(torch.nn.GroupNorm, AutocastMixin):
    def _autocast_forward(self, x):
        weight = to_device(self.weight, x.device)
        bias = to_device(self.bias, x.device)
        return torch.nn.functional.group_norm(x, self.num_groups, weight, bias, self.eps)

    def forward(self, x):
        if getattr(self, "_autocast", False):
            return self._autocast_forward(x)
        return super().forward(x)
