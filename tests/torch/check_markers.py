#!/usr/bin/env python3
"""Assert which accelerate 1.12.0 hook methods carry dynamo's disable marker.

Usage: check_markers.py TREE [--expect fenced|unfenced]

Imports ``accelerate.hooks`` from TREE (prepended to sys.path; the import
must resolve inside TREE) with real torch, takes each method's raw function
from the class ``__dict__`` (unwrapping staticmethod / classmethod /
property), and checks ``inspect.getattr_static(f, "_torchdynamo_disable",
False) is True``, which ``torch.compiler.disable()`` / ``torch._dynamo.disable``
set on the function they return.

--expect fenced (default): the seven offload hooks upstream's fix fenced carry
the marker, and ModelHook's own no-op pre_forward / post_forward do not.
--expect unfenced: none of them carries it (the pristine tree).

Prints one line per method and exits 1 on any mismatch.
"""

import argparse
import inspect
import os
import sys

FENCED = [
    ("SequentialHook", "pre_forward"),
    ("SequentialHook", "post_forward"),
    ("AlignDevicesHook", "pre_forward"),
    ("AlignDevicesHook", "post_forward"),
    ("CpuOffload", "pre_forward"),
    ("LayerwiseCastingHook", "pre_forward"),
    ("LayerwiseCastingHook", "post_forward"),
]
NEVER = [("ModelHook", "pre_forward"), ("ModelHook", "post_forward")]


def raw_function(cls, name):
    attr = cls.__dict__[name]
    if isinstance(attr, (staticmethod, classmethod)):
        return attr.__func__
    if isinstance(attr, property):
        return attr.fget
    return attr


def has_marker(fn):
    return inspect.getattr_static(fn, "_torchdynamo_disable", False) is True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tree")
    ap.add_argument("--expect", choices=("fenced", "unfenced"), default="fenced")
    args = ap.parse_args()
    tree = os.path.abspath(args.tree)
    sys.path.insert(0, tree)
    import accelerate.hooks as hooks

    if not os.path.abspath(hooks.__file__).startswith(tree + os.sep):
        print(f"FAIL accelerate.hooks imported from {hooks.__file__}, not from {tree}")
        return 1

    failed = 0
    for cls_name, meth in FENCED + NEVER:
        want = args.expect == "fenced" and (cls_name, meth) in FENCED
        fn = raw_function(getattr(hooks, cls_name), meth)
        got = has_marker(fn)
        ok = got == want
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {cls_name}.{meth}: marker={got} (want {want})")
    print(f"check_markers {args.expect}: {len(FENCED + NEVER) - failed} ok, {failed} wrong")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
