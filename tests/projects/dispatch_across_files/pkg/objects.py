# Hook objects, defined apart from what calls them.
class StageHook:
    def on_enter(self, module, *args):
        raise NotImplementedError

    def on_exit(self, module, *args):
        raise NotImplementedError


class GatherStage(StageHook):
    def __init__(self, device):
        self.device = device

    def on_enter(self, module, *args):
        for p in module.parameters(recurse=False):
            p.data = p.data.to(self.device, non_blocking=True)

    def on_exit(self, module, *args):
        for p in module.parameters(recurse=False):
            p.data = p.data.to("cpu")


class TimingStage(StageHook):
    def on_enter(self, module, *args):
        self.depth = getattr(self, "depth", 0) + 1

    def on_exit(self, module, *args):
        self.depth -= 1
