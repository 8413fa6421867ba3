# A forward replacement entering a context manager (`with Cls(...):`) runs
# its `__enter__` before the block and `__exit__` after it: steps of the
# forward, judged like any other. A context manager that only waits for
# the device is none; nor is a call whose only sign is a stream ordered by
# a class of another file that moves no module state, even though this
# file's own class moves weights elsewhere.
import torch

from pkg.cache.streams import KeyValueCache, Timer
from pkg.zero import GatheredParameters


class Engine:
    def __init__(self, layers):
        self.layers = layers
        self.cache = KeyValueCache()

    def offload(self):
        for layer in self.layers:
            layer.to("cpu", non_blocking=True)

    def prompt(self, key):
        return self.cache.update(key)

    def _forward_of(self, layer):
        def run_forward(*inputs, **kwargs):
            self.prompt(inputs[0])
            with GatheredParameters(layer.parameters()):
                with Timer():
                    return layer.forward(*inputs, **kwargs)

        return run_forward

    def install(self):
        for layer in self.layers:
            layer.forward = self._forward_of(layer)
