import torch

from pkg.store import LazyStreams, Store, Streams


class Fetching(torch.nn.Module):
    """`_bring` is a step this run fences: `Store.fetch` runs inside it
    (covered, no fence of its own)."""

    def __init__(self):
        super().__init__()
        self.store = Store()

    def forward(self, x):
        self._bring()
        return x * self.store.w

    def _bring(self):
        self.store.fetch()


class Quiet(torch.nn.Module):
    """Its step is left alone by a comment: what it calls is traced, so
    `Store.refetch` is fenced itself."""

    def __init__(self):
        super().__init__()
        self.store = Store()

    def forward(self, x):
        self._bring_quietly()
        return x * self.store.w

    def _bring_quietly(self):  # hookfence: ignore -- measured: no graph break wanted here
        self.store.refetch()


class AlreadyFenced(torch.nn.Module):
    """Its step is fenced in the source: `Store.fetch_again` is covered."""

    def __init__(self):
        super().__init__()
        self.store = Store()

    def forward(self, x):
        self._bring_fenced()
        return x * self.store.w

    @torch.compiler.disable()
    def _bring_fenced(self):
        self.store.fetch_again()


class Shallow(torch.nn.Module):
    """Its step is fenced with `recursive=False`: what it calls is still
    compiled, so `Store.fetch_shallow` is fenced itself."""

    def __init__(self):
        super().__init__()
        self.store = Store()

    def forward(self, x):
        self._bring_shallow()
        return x.to(self.store.w.device, non_blocking=True) * self.store.w

    @torch.compiler.disable(recursive=False)
    def _bring_shallow(self):
        self.store.fetch_shallow()


class Swapping(torch.nn.Module):
    """Its step `_swap` counts two effects, one through each helper of
    `Streams`: both helpers are covered by it."""

    def __init__(self, block):
        super().__init__()
        self.streams = Streams()
        self.block = block

    def forward(self, x):
        self._swap()
        return x * self.block.w

    def _swap(self):
        self.streams.prefetch(self.block)
        self.streams.drain(self.block)


class Staging(torch.nn.Module):
    """Its step `_stage` calls `prefetch` on streams of either class: the
    chain goes through one override, and the other, doing the same work
    there (the same sign), is covered too."""

    def __init__(self, block, lazy=False):
        super().__init__()
        self.streams = LazyStreams() if lazy else Streams()
        self.block = block

    def forward(self, x):
        self._stage()
        return x * self.block.w

    def _stage(self):
        self.streams.prefetch(self.block)
