import torch


class GatherEngine:
    def __init__(self, group):
        self.group = group

    def gather(self, module):
        for p in module.parameters():
            full = torch.empty(p._full_numel, device=p.device)
            torch.distributed.all_gather_into_tensor(full, p.data, group=self.group)
            p.data = full

    def release(self, module):
        for p in module.parameters():
            p.data = p._local_shard

    def log(self, message):
        self.last = message
