"""A hook manager with its own protocol: no ModelHook anywhere."""
import functools


class LayerHook:
    def pre_fwd_exec(self, module, *args):
        return args

    def post_fwd_exec(self, module, output):
        return output


class HookManager:
    def __init__(self):
        self.hooks = {}

    def attach(self, module, hook):
        self.hooks.setdefault(id(module), []).append(hook)
        module._orig_forward = module.forward
        module.forward = functools.partial(self._run, module)

    def _run(self, module, *args, **kwargs):
        for hook in self.hooks[id(module)]:
            args = hook.pre_fwd_exec(module, *args)
        output = module._orig_forward(*args, **kwargs)
        for hook in self.hooks[id(module)]:
            output = hook.post_fwd_exec(module, output)
        return output
