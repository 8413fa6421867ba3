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


def inputs_to_device(t):
    return t.to("cuda")


def warm(layer, args):
    layer.to("cuda")


def noop_pre(layer, args):
    return None


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
            self.each_input(layer, inputs_to_device)
            # Called on the class, the instance passed first.
            HookOwner.attach_pre(self, layer, warm)



class Renamed(HookOwner):
    def install(self, model):
        # A local name shadows the function of that name: `park` (which
        # moves weights) is not what is registered.
        park = noop_pre
        self.attach_pre(model, park)


def install_everywhere(model):
    attach_everywhere(model, drop_cache)
