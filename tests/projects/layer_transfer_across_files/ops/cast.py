# Brings a layer's tensor to the device of its input, handing back the copy.
def to_device(t, device):
    if t is None or t.device.type == device.type:
        return t
    return t.to(device)
