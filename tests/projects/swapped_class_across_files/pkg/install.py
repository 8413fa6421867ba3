# Swaps the classes of live modules; the lookups are defined elsewhere.
from .lookups import Following, Rehoming, Streaming, onload_on_read, trace_reads


def enable_onload(module):
    cls = module.__class__
    module.__class__ = type("Onload" + cls.__name__, (cls,), {"__getattr__": onload_on_read})


def enable_tracing(module):
    cls = module.__class__
    module.__class__ = type("Traced" + cls.__name__, (cls,), {"__getattr__": trace_reads})


def enable_streaming(linear):
    linear.__class__ = Streaming


def enable_rehoming(linear):
    linear.__class__ = Rehoming


def enable_following(linear):
    linear.__class__ = Following
