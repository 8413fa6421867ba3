import time

import torch


def _stats(output):
    as_float = output.to(torch.float32)
    return as_float.mean().item()


def _record(module, inputs, output):
    module.last_mean = _stats(output)
    return output


def _timed(module, inputs, output):
    torch.cuda.synchronize()
    module.elapsed = time.perf_counter() - module.started


def watch(model):
    model.register_forward_hook(_record)
    model.register_forward_hook(_timed)
