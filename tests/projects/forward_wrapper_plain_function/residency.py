def ensure_resident(module):
    for name, buffer in module.named_buffers():
        buffer.data = buffer.data.cuda(non_blocking=True)
