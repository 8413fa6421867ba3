def move_block(block, device):
  for p in block.parameters():
    p.data = p.data.to(device)
