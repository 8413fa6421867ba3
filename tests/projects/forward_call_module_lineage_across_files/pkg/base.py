# Two bases in a module of their own: a pipeline stage that is no
# nn.Module (its lineage ends in abc.ABC), and a model mixin that is one.
from abc import ABC, abstractmethod

import torch


class PipelineStage(ABC):
    @abstractmethod
    def forward(self, batch):
        ...


class OffloadableModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
