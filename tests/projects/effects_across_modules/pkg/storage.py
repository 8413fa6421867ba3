# Helpers whose effects depend on what they are handed: the hooks of
# pkg/hooks.py pass module state to some and activations or tensors they
# make to others.
import torch
import torch.distributed as dist


def free_storage(tensor):
    tensor.untyped_storage().resize_(0)


def all_gather_into(full, shard):
    return dist.all_gather_into_tensor(full, shard, async_op=True)


def to_device(module, device):
    return module.to(device)


class ShardHandle:
    def __init__(self, params, device):
        self.params = params
        self.device = device
        self.pending = []

    def gather(self):
        for p in self.params:
            full = torch.empty(p.full_numel, device=self.device)
            self.pending.append(all_gather_into(full, p.shard))
            p.data = full

    def wait(self):
        for handle in self.pending:
            handle.wait()

    def release(self):
        for p in self.params:
            free_storage(p.data)
            p.data = p.shard
