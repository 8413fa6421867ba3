#!/usr/bin/env python3
"""Cost in one file's size: hostile shapes at n and 2n (benchmark rows, never
a timed test).

Each shape is one generated file (with a registered offload hook, so that it
is parsed and analysed) in a project of its own. hookfence's dry run is timed
on it at n and at 2n (median of --runs runs); the ratio of the two medians
should be about 2 where the cost is linear in the file's size. The shapes are
the blow-ups an adversarial trial found (issue 19): nested lambdas, method-call
chains at module level and inside a hook, many hook classes, many registered
closures, a deep class hierarchy, many forward replacements, one hook calling
many distinct functions.

Usage: bench/hostile.py --hookfence PATH [--runs N] [--out FILE]
Appends a Markdown section to --out (or prints it).
"""

import argparse
import os
import statistics
import subprocess
import tempfile
import time

HOOK = "import torch\n\n\ndef pre(m, a):\n    m.to('cuda')\n\n\nmodel.register_forward_pre_hook(pre)\n"


def lambdas(n):
    return HOOK + "f = " + "lambda: " * n + "1\n"


def method_chain(n):
    return HOOK + "y = module" + ".a()" * n + "\n"


def method_chain_in_hook(n):
    return (
        "import torch\n\n\ndef pre(m, a):\n    y = m"
        + ".a()" * n
        + "\n    m.to('cuda')\n\n\nmodel.register_forward_pre_hook(pre)\n"
    )


def hook_classes(n):
    return "import torch\nfrom accelerate.hooks import ModelHook\n" + "".join(
        f"\n\nclass H{i}(ModelHook):\n    def pre_forward(self, module, *args):\n"
        "        module.to('cuda')\n        return args\n"
        for i in range(n)
    )


def closures(n):
    return "import torch\n\n\ndef install(model):\n" + "".join(
        f"    def pre{i}(m, a):\n        m.to('cuda')\n\n"
        f"    model.register_forward_pre_hook(pre{i})\n"
        for i in range(n)
    )


def hierarchy(n):
    return (
        HOOK
        + "\n\nclass C0:\n    pass\n"
        + "".join(f"\n\nclass C{i}(C{i - 1}):\n    pass\n" for i in range(1, n))
    )


def forward_replacements(n):
    return "import torch\n" + "".join(
        f"\n\ndef install{i}(m):\n    orig = m.forward\n\n    def nf(*args):\n"
        "        m.to('cuda')\n        return orig(*args)\n\n    m.forward = nf\n"
        for i in range(n)
    )


def many_callees(n):
    return (
        "import torch\n"
        + "".join(f"\n\ndef f{i}(m):\n    return m\n" for i in range(n))
        + "\n\ndef pre(m, a):\n"
        + "".join(f"    f{i}(m)\n" for i in range(n))
        + "\n\nmodel.register_forward_pre_hook(pre)\n"
    )


def attribute_rebound(n):
    # B7: one attribute set to n functions and called after each, in one hook.
    return (
        "import torch\n"
        + "".join(f"\n\ndef r{i}(m):\n    return m\n" for i in range(n))
        + "\n\ndef pre(m, a):\n    ctx = object()\n"
        + "".join(f"    ctx.rel = r{i}\n    ctx.rel(m)\n" for i in range(n))
        + "\n\nmodel.register_forward_pre_hook(pre)\n"
    )


def lineage_with_methods(n):
    # A chain of n classes, each subclassing the one before and defining a
    # hook method that moves the module: every class asks for its lineage.
    return (
        "import torch\nfrom accelerate.hooks import ModelHook\n\n\nclass C0(ModelHook):\n    pass\n"
        + "".join(
            f"\n\nclass C{i}(C{i - 1}):\n    def pre_forward(self, module, *a, **k):\n"
            "        module.to('cuda')\n"
            for i in range(1, n)
        )
    )


def attribute_rebound_moving(n):
    # B7 where every function moves the module: each call reaches n
    # functions with effects.
    return attribute_rebound(n).replace("    return m\n", "    m.to('cuda')\n    return m\n")


def replayed_tables(n):
    # B8: n hooks replaying a table that n registrations fill.
    return (
        "import torch\n"
        + "".join(
            f"\n\ndef h{i}(m, a):\n    return None\n\n\nmodel.register_forward_pre_hook(h{i})\n"
            for i in range(n)
        )
        + "".join(
            f"\n\ndef fused{i}(module, args):\n    for sub in module.children():\n"
            "        for hook in sub._forward_pre_hooks.values():\n            hook(sub, args)\n"
            f"\n\nmodel.register_forward_pre_hook(fused{i})\n"
            for i in range(n)
        )
    )


# (name, generator, n): each is timed at n and 2n.
def named_setattrs(n):
    # n functions each setting an attribute named by a parameter, called
    # with "forward" or another name: each asks who passes its parameter.
    return (
        "import torch\n"
        + "".join(
            f"\n\ndef patch{i}(m, name):\n    setattr(m, name, lambda *a: m.to('cuda'))\n"
            for i in range(n)
        )
        + "\n\ndef install(m):\n"
        + "".join(
            f"    patch{i}(m, {'forward' if i % 2 else 'decode'!r})\n" for i in range(n)
        )
    )


def quoted_forwards(n):
    # n strings "forward" after a comma in a file that never calls setattr:
    # each is a candidate the prefilter rejects (the search for `setattr`
    # is made once per file, not once per string).
    return "import torch\n\n" + "".join(f'x{i} = f(a, "forward")\n' for i in range(n))


def chained_moves(n):
    # One line of n chained `.to(...)` calls in a file that defines a
    # forward and spells no other sign: the reading of a module moved in
    # place reads each line once (it scanned back to the line's start from
    # every `.to(` before).
    return (
        "import torch\n\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
        + "y = x" + ".to(d)" * n + "\n"
    )


def carrying_loops(n):
    # One hook with n loops, each nested in the last (CPython allows about
    # 100 levels of indentation), each reading a name before binding it (a
    # value carried to the next iteration): looking at a function's loops
    # and walking them twice costs at most 4x its length, and loops inside
    # a loop walked to learn what it carries are walked once.
    body = ""
    for i in range(n):
        pad = "    " * (i + 1)
        body += f"{pad}for l{i} in m.layers:\n{pad}    if w{i} is not None:\n{pad}        w{i}.data = w{i}.data.cpu()\n{pad}    w{i} = l{i}.weight\n"
    return (
        "import torch\n\n\ndef pre(m, a):\n"
        + "".join(f"    w{i} = None\n" for i in range(n))
        + body
        + "\n\nmodel.register_forward_pre_hook(pre)\n"
    )


SHAPES = [
    ("nested lambdas", lambdas, 1000),
    ("method-call chain", method_chain, 500),
    ("method-call chain in a hook", method_chain_in_hook, 500),
    ("hook classes in one file", hook_classes, 5000),
    ("registered closures in one file", closures, 5000),
    ("class hierarchy depth", hierarchy, 1000),
    ("class lineage with a hook method in each class", lineage_with_methods, 800),
    ("forward replacements in one file", forward_replacements, 4000),
    ("one hook calling n functions", many_callees, 16000),
    ("one attribute rebound and called n times (B7)", attribute_rebound, 1000),
    ("B7 where every function moves the module", attribute_rebound_moving, 1000),
    ("n hooks replaying a table of n registrations (B8)", replayed_tables, 1000),
    ("setattr(m, name, f) with a parameter name in n functions", named_setattrs, 2000),
    ('"forward" after a comma n times, no setattr', quoted_forwards, 20000),
    ("one line of n chained .to(...) calls beside a forward", chained_moves, 100000),
    ("n nested loops carrying a name to the next iteration", carrying_loops, 45),
]


def timed(hookfence, project, runs):
    times = []
    code = None
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(
            [hookfence, "-q", project],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        times.append(time.perf_counter() - start)
        code = done.returncode
    return statistics.median(times), code


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hookfence", required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, make, n in SHAPES:
            medians = []
            for size in (n, 2 * n):
                project = os.path.join(tmp, f"{make.__name__}-{size}")
                os.makedirs(project)
                open(os.path.join(project, "pyproject.toml"), "w").close()
                with open(os.path.join(project, "a.py"), "w") as f:
                    f.write(make(size))
                medians.append((size, *timed(args.hookfence, project, args.runs)))
            (n1, t1, c1), (n2, t2, c2) = medians
            rows.append(
                f"| {name} | {n1} | {t1:.3f} | {n2} | {t2:.3f} | {t2 / t1:.2f}× | exit {c1}, {c2} |"
            )
    report = "\n".join(
        [
            "",
            "## Cost in one file's size (hostile shapes, `bench/hostile.py`)",
            "",
            f"Dry run on one generated file at n and 2n, median of {args.runs} runs each"
            " (process start and query compilation, about 0.1 s, included); linear cost"
            " gives about 2×. Exit 2 means the file was refused (nested past the bound).",
            "",
            "| shape | n | s | 2n | s | 2n / n | exit |",
            "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
            *rows,
            "",
        ]
    )
    if args.out:
        with open(args.out, "a") as f:
            f.write(report)
    print(report)


if __name__ == "__main__":
    main()
