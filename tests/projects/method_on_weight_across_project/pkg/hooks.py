# Hooks that reach methods of classes no module here imports.
#
# `release` calls a method of the object attached to each weight: one class
# of the project defines it, so it is that class's (the weight's own
# storage is freed there). `note` calls a method of an object kept on the
# module, of no known class: the one class of the package that defines that
# method answers (a name several classes define would not). `flush` calls a
# method four classes define: none is taken. `gather` calls a method of the weight
# itself, which one weight class of the project defines.


def release(module, args, output):
    for p in module.parameters(recurse=False):
        p.shard_state.drop_full_copy()


def note(module, args, output):
    module.usage.note_release_of(module)


def flush(module, args, output):
    for p in module.parameters(recurse=False):
        p.flusher.flush_everything()


def gather(module, args):
    for p in module.parameters(recurse=False):
        p.gather_full()


def install(model):
    for sub in model.modules():
        sub.register_forward_hook(release)
        sub.register_forward_hook(note)
        sub.register_forward_hook(flush)
        sub.register_forward_pre_hook(gather)
