# Stage objects: every method here moves its module's weights, and is
# reached only through what other modules call on stage objects.
class Stage:
    def bring_in(self, module, *args):
        raise NotImplementedError

    def send_back(self, module, *args):
        raise NotImplementedError

    def refresh(self, module, *args):
        raise NotImplementedError

    def settle(self, module, *args):
        raise NotImplementedError


class DeviceStage(Stage):
    def __init__(self, device):
        self.device = device

    def bring_in(self, module, *args):
        for p in module.parameters(recurse=False):
            p.data = p.data.to(self.device, non_blocking=True)

    def send_back(self, module, *args):
        for p in module.parameters(recurse=False):
            p.data = p.data.to("cpu")

    def refresh(self, module, *args):
        module.to(self.device)

    def settle(self, module, *args):
        module.to("cpu")
