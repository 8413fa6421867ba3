#!/usr/bin/env python3
"""Check the wrap strategy's generated helper modules in TREE, with real torch.

Usage: check_no_compile.py TREE

Finds every ``_no_compile.py`` under TREE (hookfence writes one per top-level
package: ``accelerate/_no_compile.py``, and ``_no_compile.py`` at the root for
the loose ``hookfence_plain_hook`` module), imports ``accelerate.hooks`` (and
``hookfence_plain_hook`` when TREE has it) so every ``@no_compile`` hook
registers itself, then checks:

- ``registered_hooks()`` (``(qualified name, object)`` pairs), over all
  helpers, names accelerate 1.12.0's seven offload hooks (and the plain hook);
- every helper's ``assert_all_disabled()`` returns without raising;
- negative control: with ``CpuOffload.pre_forward`` rebound to the function
  the fence wraps (``__wrapped__``), ``accelerate._no_compile``'s
  ``assert_all_disabled()`` raises ``AssertionError`` naming it.

Prints one line per check; exits 1 on any failure.
"""

import importlib
import os
import sys

EXPECTED = [
    "accelerate.hooks.SequentialHook.pre_forward",
    "accelerate.hooks.SequentialHook.post_forward",
    "accelerate.hooks.AlignDevicesHook.pre_forward",
    "accelerate.hooks.AlignDevicesHook.post_forward",
    "accelerate.hooks.CpuOffload.pre_forward",
    "accelerate.hooks.LayerwiseCastingHook.pre_forward",
    "accelerate.hooks.LayerwiseCastingHook.post_forward",
]


def entry_name(entry):
    return entry[0] if isinstance(entry, tuple) else getattr(entry, "__qualname__", repr(entry))


def main():
    tree = os.path.abspath(sys.argv[1])
    sys.path.insert(0, tree)

    helpers = []
    for root, dirs, files in os.walk(tree):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        if "_no_compile.py" in files:
            rel = os.path.relpath(os.path.join(root, "_no_compile.py"), tree)
            helpers.append(rel[: -len(".py")].replace(os.sep, "."))
    if "accelerate._no_compile" not in helpers:
        print(f"FAIL no accelerate/_no_compile.py under {tree} (found: {helpers})")
        return 1

    import accelerate.hooks  # noqa: F401  (registers accelerate's hooks)

    expected = list(EXPECTED)
    if os.path.exists(os.path.join(tree, "hookfence_plain_hook.py")):
        import hookfence_plain_hook  # noqa: F401

        expected.append("hookfence_plain_hook.offload_pre_hook")

    failed = 0

    def report(ok, text):
        nonlocal failed
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {text}")

    mods = {name: importlib.import_module(name) for name in sorted(helpers)}
    for name, mod in mods.items():
        if not os.path.abspath(mod.__file__).startswith(tree + os.sep):
            report(False, f"{name} imported from {mod.__file__}, not from {tree}")
    names = {entry_name(e) for mod in mods.values() for e in mod.registered_hooks()}
    missing = [n for n in expected if n not in names]
    report(not missing, f"registered_hooks() over {sorted(mods)}: {len(names)} hooks, missing {missing}")

    for name, mod in mods.items():
        try:
            mod.assert_all_disabled()
            report(True, f"{name}.assert_all_disabled()")
        except AssertionError as e:
            report(False, f"{name}.assert_all_disabled(): {e}")

    # Negative control: an escaped hook must be named.
    cls = accelerate.hooks.CpuOffload
    fenced = cls.__dict__["pre_forward"]
    raw = getattr(fenced, "__wrapped__", None)
    if raw is None:
        report(False, "CpuOffload.pre_forward has no __wrapped__ to rebind for the negative control")
    else:
        cls.pre_forward = raw
        try:
            mods["accelerate._no_compile"].assert_all_disabled()
            report(False, "assert_all_disabled() passed with CpuOffload.pre_forward unfenced")
        except AssertionError as e:
            report("CpuOffload.pre_forward" in str(e), f"assert_all_disabled() with one hook unfenced raises: {e}")
        finally:
            cls.pre_forward = fenced
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
