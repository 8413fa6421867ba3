from lib.hooking import HookOwner, attach_everywhere


def bring_in(layer, args):
    for w in layer.parameters():
        w.data = w.data.to("cuda", non_blocking=True)


def send_back(layer, args, out):
    layer.to("cpu")


def tally(layer, args):
    layer.seen = getattr(layer, "seen", 0) + 1


def drop_cache(layer, args):
    layer.cpu()


def park(layer, args):
    layer.to("meta")


def scale_out(layer, args, out):
    return out * 2


class Offloader(HookOwner):
    def install(self, model):
        for layer in model.children():
            self.attach_pre(layer, bring_in)
            self.attach_pre(layer, fn=tally)
            self.attach_gated(layer, send_back)
            self.attach_gated(layer, scale_out)
            # Only kept, never registered: no hook.
            self.remember(layer, park)


def install_everywhere(model):
    attach_everywhere(model, drop_cache)
