import torch

from ..util import move_block


def swap_in(block):
  move_block(block, "cuda")


class BlockSwapper:
  def __init__(self, blocks):
    self.blocks = blocks

  def enable(self):
    for i, block in enumerate(self.blocks):
      if i % 2:
        def hook(module, args):
          swap_in(module)
        block.register_forward_pre_hook(hook)
