import re

from pkg.offload.manager import Streamer

jit = re


class NotTorch:
    """`compile` that is no torch's: not traced by dynamo."""

    def __init__(self):
        self.streamer = Streamer()

    @jit.compile
    def infer(self, blocks, x):
        self.streamer.prefetch(blocks, 0)
        return x
