class Coordinator:
    def __init__(self, device):
        self.device = device
        self.trace_log = []

    def trace(self, sub_module):
        self.trace_log.append(type(sub_module).__name__)

    def gather(self, sub_module):
        for param in sub_module.parameters():
            param.data = param.ds_tensor.to(self.device, non_blocking=True)

    def drop(self, sub_module):
        for param in sub_module.parameters():
            param.data = param.ds_tensor
