# A package vendored inside an application (`app/native/streaming/`) imports
# itself by its own name (`from streaming.assign import ...`), which works once
# the application puts `app/native` on `sys.path` (as `app/native/__init__.py`
# does). The hook registered in `streaming/wrapper.py` swaps each block's
# parameters through a helper of that package: the import is resolved in the
# directory above the package the importing file lies in, and the hook is
# offload. The negative (`logging_only`) registers a hook whose helper, of the
# same package, only counts calls.

import itertools

from streaming.assign import count_call, put_into_module
from torch import nn


class StreamedBlocks(nn.Module):
    def __init__(self, blocks, provider):
        super().__init__()
        self.blocks = blocks
        self.provider = provider
        self.counter = {}
        for index, block in enumerate(self.blocks):
            block.register_forward_pre_hook(lambda _m, _a, *, index=index: self.load(index))
            block.register_forward_hook(self.logging_only)

    def load(self, index):
        weights = self.provider.get(index)
        block = self.blocks[index]
        for name, _ in itertools.chain(block.named_parameters(), block.named_buffers()):
            put_into_module(block, name, weights[name])

    def logging_only(self, module, args, output):
        count_call(self.counter)
