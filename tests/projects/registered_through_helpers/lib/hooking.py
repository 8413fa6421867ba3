"""Helpers that register hooks for their callers: one registers the function
it is handed, one registers a closure that calls it (a hook that can be
switched off), one only keeps it."""


class HookOwner:
    paused = False

    def attach_pre(self, layer, fn):
        return layer.register_forward_pre_hook(fn)

    def attach_gated(self, layer, fn):
        def gate(*args):
            if HookOwner.paused:
                return None
            return fn(*args)

        return layer.register_forward_hook(gate)

    def each_input(self, layer, fn):
        # Hands `fn` each input, not the module: not a hook of its own.
        def per_input(mod, args):
            return tuple(fn(a) for a in args)

        return layer.register_forward_pre_hook(per_input)

    def remember(self, layer, fn):
        self.kept = (layer, fn)


def attach_everywhere(model, fn):
    # Hands its own parameter on to a helper: its callers' functions count.
    owner = HookOwner()
    for layer in model.children():
        owner.attach_pre(layer, fn)
