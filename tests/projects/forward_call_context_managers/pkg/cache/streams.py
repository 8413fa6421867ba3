import torch


class KeyValueCache:
    """A cache of activations: it orders its copy stream, moves no weight."""

    def __init__(self):
        self.stream = torch.cuda.Stream()
        self.keys = []

    def update(self, key):
        torch.cuda.current_stream().wait_stream(self.stream)
        self.keys.append(key)
        return self.keys


class Timer:
    """Times a block: waits for the device, moves nothing."""

    def __enter__(self):
        torch.cuda.synchronize()
        return self

    def __exit__(self, *exc):
        torch.cuda.synchronize()
