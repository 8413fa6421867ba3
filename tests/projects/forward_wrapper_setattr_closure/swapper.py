import torch


class BlockSwapper:
  def __init__(self, blocks, device):
    self.blocks = blocks
    self.device = device

  def _bring_in(self, block):
    block.to(self.device)

  def _send_out(self, block):
    block.to("cpu")

  def wrap(self, block):
    original = block.forward

    def swapped(*args, **kwargs):
      self._bring_in(block)
      out = original(*args, **kwargs)
      self._send_out(block)
      return out

    setattr(block, "forward", swapped)
