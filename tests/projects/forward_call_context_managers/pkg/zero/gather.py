import torch
import torch.distributed as dist


class GatheredParameters:
    """Gathers sharded parameters on entry and frees them on exit."""

    def __init__(self, params):
        self.params = list(params)

    def __enter__(self):
        for p in self.params:
            full = torch.empty(p.full_shape, device=p.device)
            dist.all_gather_into_tensor(full, p.data)
            p.data = full

    def __exit__(self, *exc):
        for p in self.params:
            p.data = p.shard
