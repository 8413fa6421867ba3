#!/usr/bin/env python3
"""The lazy-fence experiment: the wrap strategy's helper (``no_compile``)
against torch's own ``torch.compiler.disable`` and against a lazy wrapper of
the kind accelerate ships (``torch.compiler.disable`` called on the first
call), with real torch.

Usage: lazy_fence.py TREE HELPER_MODULE [--json OUT]

TREE is put first on ``sys.path``; HELPER_MODULE is the helper hookfence
generated there (``accelerate._no_compile``). Measures, each in a fresh
interpreter:

- import: ``import torch`` then ``import HELPER_MODULE`` (median of 5):
  seconds, and whether it pulled in ``torch._dynamo``; the same for
  ``import torch._dynamo`` alone, which is what the eager fence costs;
- compile, once per way to fence (``none``, ``eager``, ``helper``,
  ``lazy_first_call``): a 4-layer model whose every ``Linear`` has a hook
  object (its ``pre_forward``, called from a replaced forward, moves the
  weight) and a plain forward pre-hook (moves the bias), both fenced that
  way; compiled (backend ``eager``: graph breaks and graphs do not depend on
  the backend) before any hook ran eagerly, and called 3 times: dynamo's graph breaks, unique graphs,
  frames, outputs equal to eager; the same after ``torch._dynamo.reset()``;
  and whether ``fullgraph=True`` raises.

Prints one JSON document (and writes it to --json), then one PASS/FAIL line
per check; exits 1 on any FAIL. The checks: the helper does not import
torch._dynamo; under compile it costs no more graph breaks and no more graphs
than the eager fence, before and after a reset; outputs equal eager; with
fullgraph=True it raises exactly where the eager fence does.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

FENCES = ["none", "eager", "helper", "lazy_first_call"]

CHILD = r'''
import functools, importlib, json, sys
sys.path.insert(0, TREE)
import torch
torch.set_num_threads(1)
helper = importlib.import_module(HELPER)
import torch._dynamo
from torch._dynamo.utils import counters


def lazy_first_call(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not hasattr(wrapper, "_compiled_fn"):
            wrapper._compiled_fn = torch.compiler.disable(fn)
        return wrapper._compiled_fn(*args, **kwargs)
    return wrapper


FENCE = {
    "none": lambda fn: fn,
    "eager": torch.compiler.disable,
    "helper": helper.no_compile,
    "lazy_first_call": lazy_first_call,
}[WAY]


def build():
    torch.manual_seed(0)
    layers = [torch.nn.Linear(16, 16) for _ in range(4)]
    model = torch.nn.Sequential(*[m for layer in layers for m in (layer, torch.nn.ReLU())])

    class Offload:
        @FENCE
        def pre_forward(self, module, *args):
            module.weight.data = module.weight.data.to("cpu")
            self.calls = getattr(self, "calls", 0) + 1
            return args

    @FENCE
    def bias_to_device(module, args):
        module.bias.data = module.bias.data.to("cpu")

    for layer in layers:
        layer._hook = Offload()
        old = layer.forward

        def new_forward(*args, _layer=layer, _old=old, **kwargs):
            args = _layer._hook.pre_forward(_layer, *args)
            return _old(*args, **kwargs)

        layer.forward = new_forward
        layer.register_forward_pre_hook(bias_to_device)
    return model


def run():
    torch._dynamo.reset()
    counters.clear()
    x = torch.randn(2, 16)
    # Compiled before any fenced hook has run eagerly: dynamo meets every
    # fence first while tracing.
    compiled = torch.compile(build(), backend="eager")
    outputs = [compiled(x) for _ in range(3)]
    expected = build()(x)
    equal = all(torch.allclose(out, expected) for out in outputs)
    return {
        "graph_breaks": sum(counters["graph_break"].values()),
        "graphs": counters["stats"]["unique_graphs"],
        "frames": dict(counters["frames"]),
        "equal": equal,
    }


first = run()
again = run()
torch._dynamo.reset()
try:
    torch.compile(build(), backend="eager", fullgraph=True)(torch.randn(2, 16))
    fullgraph = "compiles"
except Exception as e:
    fullgraph = "raises " + type(e).__name__
print(json.dumps({"first": first, "after_reset": again, "fullgraph": fullgraph}))
'''

IMPORT = r'''
import sys, time
sys.path.insert(0, TREE)
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import importlib
importlib.import_module(WHAT)
t2 = time.perf_counter()
print(t1 - t0, t2 - t1, int("torch._dynamo" in sys.modules))
'''


def child(code, **names):
    prelude = "".join(f"{k} = {v!r}\n" for k, v in names.items())
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-c", prelude + code], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"child failed ({names}):\n{r.stderr[-3000:]}")
    return r.stdout.strip().splitlines()[-1]


def import_cost(tree, what, runs=5):
    after, dynamo = [], []
    for _ in range(runs):
        _, b, d = child(IMPORT, TREE=tree, WHAT=what).split()
        after.append(float(b))
        dynamo.append(d == "1")
    return {"module": what, "seconds_after_torch": round(statistics.median(after), 3), "imports_torch_dynamo": any(dynamo)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tree")
    ap.add_argument("helper")
    ap.add_argument("--json")
    args = ap.parse_args()
    tree = os.path.abspath(args.tree)

    summary = {
        "torch": child("import torch; print(torch.__version__)"),
        "import": {
            "helper": import_cost(tree, args.helper),
            "torch._dynamo (what the eager fence imports)": import_cost(tree, "torch._dynamo"),
        },
        "compile": {way: json.loads(child(CHILD, TREE=tree, HELPER=args.helper, WAY=way)) for way in FENCES},
    }
    text = json.dumps(summary, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(text + "\n")

    checks = []
    helper, eager = summary["compile"]["helper"], summary["compile"]["eager"]
    checks.append(("the helper does not import torch._dynamo", not summary["import"]["helper"]["imports_torch_dynamo"]))
    for run in ("first", "after_reset"):
        h, e = helper[run], eager[run]
        checks.append((f"{run}: helper breaks {h['graph_breaks']} <= eager fence's {e['graph_breaks']}", h["graph_breaks"] <= e["graph_breaks"]))
        checks.append((f"{run}: helper graphs {h['graphs']} <= eager fence's {e['graphs']}", h["graphs"] <= e["graphs"]))
        checks.append((f"{run}: helper outputs equal eager", h["equal"]))
    checks.append((f"fullgraph=True: helper {helper['fullgraph']}, eager fence {eager['fullgraph']}", helper["fullgraph"] == eager["fullgraph"]))
    for name, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'} lazy fence: {name}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
