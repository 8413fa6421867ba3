#!/usr/bin/env python3
"""The compile experiment: offload hooks under torch.compile, with real torch.

Usage: compile_offload.py TREE [--json OUT] [--calls N] [--backend B]

TREE holds an ``accelerate`` package (pristine or rewritten by hookfence) and,
optionally, ``hookfence_plain_hook.py`` (tests/torch/plain_hook.py copied in
before the rewrite). Each case builds a small ``nn.Sequential`` (fixed seed),
attaches hooks, runs it eagerly, then ``torch.compile(model)`` (default mode,
inductor) N times, and records:

- ``equal``: every compiled output allclose to the eager output;
- ``graph_breaks``: dynamo's graph breaks (``GraphCompileReason``s with
  ``graph_break=True``, what ``torch._dynamo.explain`` counts), by reason;
- ``breaks_in_hooks``: those whose user stack, or the live Python stack when
  dynamo hit them, runs through a hook body (``pre_forward`` /
  ``post_forward`` in ``accelerate/hooks.py``, or a plain hook function) —
  the live stack matters because once dynamo skips a hook's frame, the
  functions that hook calls are compiled as frames of their own;
- ``unsupported`` / ``unsupported_in_hooks``: the same for every
  ``torch._dynamo.exc.Unsupported`` raised (graph breaks, skipped frames,
  refused inlines);
- ``graphs``: ``counters["stats"]["unique_graphs"]``; ``frames``:
  ``counters["frames"]``; ``recompiles``: frames dynamo converted after the
  first compiled call (with identical input every later conversion is a
  recompile after a guard failure);
- first-call and steady-state call times;
- ``explain``: ``torch._dynamo.explain(model)(x)``'s graph_count and
  graph_break_count on a freshly built model, as a cross-check.

Dynamo and its counters are reset between cases. Also measures
``import accelerate.hooks`` in fresh interpreters (median of 5).
Prints one JSON document on stdout (and writes it to --json).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import traceback


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("tree")
    ap.add_argument("--json", help="also write the summary here")
    ap.add_argument("--calls", type=int, default=4, help="compiled calls per case")
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--cases", help="comma-separated subset of cases")
    ap.add_argument("--no-import-time", action="store_true")
    return ap.parse_args()


ARGS = parse_args()
TREE = os.path.abspath(ARGS.tree)
sys.path.insert(0, TREE)

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
from torch._dynamo import exc as dynamo_exc  # noqa: E402
from torch._dynamo import output_graph  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

import accelerate  # noqa: E402
import accelerate.hooks  # noqa: E402

if not os.path.abspath(accelerate.__file__).startswith(TREE + os.sep):
    sys.exit(f"accelerate imported from {accelerate.__file__}, not from {TREE}")

# Tiny models: one thread (a second OpenMP thread costs ~24 ms per small
# matmul on the 2-core CI machines).
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))

THIS_FILE = os.path.abspath(__file__)
ACCEL_HOOK_NAMES = {"pre_forward", "post_forward"}
PLAIN_HOOK_NAMES = {"offload_pre_hook", "plain_pre_hook", "plain_pre_hook_fenced"}
EXEC_CPU0 = torch.device("cpu", 0)


# ---------------------------------------------------------------- hook frames
def is_hook_frame(filename, name):
    fn = (filename or "").replace(os.sep, "/")
    if name in ACCEL_HOOK_NAMES and fn.endswith("/accelerate/hooks.py"):
        return True
    if name in PLAIN_HOOK_NAMES and (
        fn == THIS_FILE.replace(os.sep, "/") or fn.endswith("/hookfence_plain_hook.py")
    ):
        return True
    return False


def short(filename):
    fn = filename.replace(os.sep, "/")
    for cut in ("/site-packages/", TREE.replace(os.sep, "/") + "/"):
        if cut in fn:
            return fn.split(cut, 1)[1]
    return os.path.basename(fn)


def hook_sites(user_stack):
    """Hook-body frames on the traced (user) stack and on the live stack."""
    sites = []
    for fs in user_stack or []:
        if is_hook_frame(fs.filename, fs.name):
            sites.append(f"{short(fs.filename)}:{fs.lineno} {fs.name}")
    f = sys._getframe(2)
    while f is not None:
        code = f.f_code
        if is_hook_frame(code.co_filename, code.co_name):
            sites.append(f"{short(code.co_filename)}:{f.f_lineno} {code.co_name} (live)")
        f = f.f_back
    return sites


EVENTS = []  # (kind, reason-head, [hook sites], innermost frame)


def _head(msg):
    return str(msg).strip().splitlines()[0][:160] if msg else ""


def _innermost(stack):
    if not stack:
        return ""
    fs = stack[-1]
    return f"{short(fs.filename)}:{fs.lineno} {fs.name}"


_orig_unsupported_init = dynamo_exc.Unsupported.__init__


def _unsupported_init(self, *a, **k):
    _orig_unsupported_init(self, *a, **k)
    stack = list(getattr(self, "real_stack", None) or [])
    EVENTS.append(("unsupported", _head(getattr(self, "msg", "")), hook_sites(stack), _innermost(stack)))


dynamo_exc.Unsupported.__init__ = _unsupported_init

_orig_post_init = output_graph.GraphCompileReason.__post_init__


def _post_init(self):
    _orig_post_init(self)
    if self.graph_break:
        stack = list(self.user_stack or [])
        EVENTS.append(("break", _head(self.reason), hook_sites(stack), _innermost(stack)))


output_graph.GraphCompileReason.__post_init__ = _post_init


# ------------------------------------------------------------------- models
def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 8),
    )


def make_input():
    g = torch.Generator().manual_seed(1)
    return torch.randn(4, 16, generator=g)


# (d) a plain register_forward_pre_hook hook that assigns param.data, written
# twice: as user code has it, and fenced the way hookfence fences it.
def plain_pre_hook(module, args):
    for name, param in module.named_parameters(recurse=False):
        param.data = module._master[name].to(EXEC_CPU0)


@torch.compiler.disable()
def plain_pre_hook_fenced(module, args):
    for name, param in module.named_parameters(recurse=False):
        param.data = module._master[name].to(EXEC_CPU0)


def attach_plain(model, hook):
    for sub in model.modules():
        params = dict(sub.named_parameters(recurse=False))
        if params:
            sub._master = {n: p.detach().clone() for n, p in params.items()}
            sub.register_forward_pre_hook(hook)
    return model


def build_cpu_offload(model):
    # accelerate.cpu_offload: AlignDevicesHook(offload=True) per layer, plus an
    # io_same_device AlignDevicesHook chained on the root (SequentialHook).
    # The execution device is plain "cpu": with torch.device("cpu", 0) 1.12.0's
    # set_module_tensor_to_device crashes already in eager (see case
    # cpu_offload_cpu0_eager). offload=True reloads every weight from the
    # weights map and puts it back on "meta" on every call regardless.
    return accelerate.cpu_offload(model, execution_device=torch.device("cpu"))


def build_cpu_offload_hook(model):
    hook = accelerate.hooks.CpuOffload(execution_device=EXEC_CPU0)
    accelerate.hooks.add_hook_to_module(model, hook)
    return model


def build_layerwise(model):
    from accelerate.big_modeling import attach_layerwise_casting_hooks

    attach_layerwise_casting_hooks(
        model,
        storage_dtype=torch.bfloat16,
        compute_dtype=torch.float32,
        skip_modules_pattern=None,
        non_blocking=False,
    )
    return model


def build_plain_tree(model):
    import hookfence_plain_hook

    return hookfence_plain_hook.attach(model)


CASES = {
    "cpu_offload": build_cpu_offload,
    "cpu_offload_hook": build_cpu_offload_hook,
    "layerwise_casting": build_layerwise,
    "plain_unfenced": lambda m: attach_plain(m, plain_pre_hook),
    "plain_fenced": lambda m: attach_plain(m, plain_pre_hook_fenced),
    "plain_tree": build_plain_tree,
}


# -------------------------------------------------------------------- runner
def reset_dynamo():
    torch._dynamo.reset()
    counters.clear()
    EVENTS.clear()


def frames_total():
    return int(counters["frames"]["total"])


def summarize_events(kind):
    evs = [e for e in EVENTS if e[0] == kind]
    by_reason = {}
    for _, head, _, _ in evs:
        by_reason[head] = by_reason.get(head, 0) + 1
    in_hooks = [e for e in evs if e[2]]
    return {
        "count": len(evs),
        "in_hooks": len(in_hooks),
        "by_reason": dict(sorted(by_reason.items(), key=lambda kv: -kv[1])),
        "hook_sites": sorted({s for e in in_hooks for s in e[2]}),
        "sites": sorted({e[3] for e in evs if e[3]}),
    }


def run_case(name, build):
    out = {"case": name}
    model = build(make_model())
    x = make_input()
    try:
        with torch.no_grad():
            ref = model(x).clone()
            ref2 = model(x).clone()
        out["eager_repeatable"] = bool(torch.equal(ref, ref2))
    except Exception as e:  # noqa: BLE001
        out["error"] = f"eager: {type(e).__name__}: {_head(e)}"
        return out

    reset_dynamo()
    compiled = torch.compile(model, backend=ARGS.backend)
    diffs, times = [], []
    warm_frames = warm_graphs = None
    try:
        with torch.no_grad():
            for i in range(ARGS.calls):
                t0 = time.perf_counter()
                y = compiled(x)
                times.append(time.perf_counter() - t0)
                diffs.append(float((y.float() - ref.float()).abs().max()))
                if not torch.allclose(y, ref, rtol=1e-4, atol=1e-5):
                    out.setdefault("mismatch_calls", []).append(i)
                if i == 0:
                    warm_frames = frames_total()
                    warm_graphs = int(counters["stats"]["unique_graphs"])
    except Exception as e:  # noqa: BLE001
        out["error"] = f"compiled call {len(times)}: {type(e).__name__}: {_head(e)}"
        out["traceback_tail"] = traceback.format_exc().strip().splitlines()[-6:]

    breaks = summarize_events("break")
    unsup = summarize_events("unsupported")
    out.update(
        {
            "equal": "error" not in out and not out.get("mismatch_calls") and len(diffs) == ARGS.calls,
            "max_abs_diff": max(diffs) if diffs else None,
            "graph_breaks": breaks["count"],
            "breaks_in_hooks": breaks["in_hooks"],
            "unsupported": unsup["count"],
            "unsupported_in_hooks": unsup["in_hooks"],
            "graphs": int(counters["stats"]["unique_graphs"]),
            "graphs_after_first_call": (
                int(counters["stats"]["unique_graphs"]) - warm_graphs if warm_graphs is not None else None
            ),
            "frames": dict(counters["frames"]),
            "recompiles": frames_total() - warm_frames if warm_frames is not None else None,
            "first_call_s": round(times[0], 3) if times else None,
            "steady_call_ms": round(1000 * statistics.median(times[1:]), 3) if len(times) > 1 else None,
            "break_reasons": breaks["by_reason"],
            "break_sites": breaks["sites"],
            "hook_break_sites": breaks["hook_sites"],
            "unsupported_reasons": unsup["by_reason"],
            "hook_unsupported_sites": unsup["hook_sites"],
        }
    )
    reset_dynamo()
    out["explain"] = explain(build)
    reset_dynamo()
    return out


def explain(build):
    """Cross-check: torch._dynamo.explain on a freshly built model, one call."""
    model = build(make_model())
    try:
        with torch.no_grad():
            ex = torch._dynamo.explain(model)(make_input())
        return {"graph_count": ex.graph_count, "graph_break_count": ex.graph_break_count}
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {_head(e)}"}


def cpu0_eager_probe():
    """accelerate.cpu_offload with execution_device=torch.device("cpu", 0), eager."""
    model = accelerate.cpu_offload(make_model(), execution_device=EXEC_CPU0)
    try:
        with torch.no_grad():
            model(make_input())
        return {"case": "cpu_offload_cpu0_eager", "error": None}
    except Exception as e:  # noqa: BLE001
        return {"case": "cpu_offload_cpu0_eager", "error": f"{type(e).__name__}: {_head(e)}"}


def import_time(runs=5):
    code = (
        "import sys, time; t0 = time.perf_counter(); import torch; t1 = time.perf_counter(); "
        "n = len(sys.modules); dyn = 'torch._dynamo' in sys.modules; "
        "import accelerate.hooks; t2 = time.perf_counter(); "
        "print(t1 - t0, t2 - t1, len(sys.modules) - n, int(dyn), int('torch._dynamo' in sys.modules))"
    )
    env = dict(os.environ, PYTHONPATH=TREE)
    torch_s, accel_s = [], []
    for _ in range(runs):
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        a, b, added, dyn_before, dyn_after = r.stdout.split()
        torch_s.append(float(a))
        accel_s.append(float(b))
    return {
        "runs": runs,
        "modules_added_by_accelerate_hooks": int(added),
        "torch_dynamo_imported_by_accelerate_hooks": dyn_before == "0" and dyn_after == "1",
        "import_torch_s": round(statistics.median(torch_s), 3),
        "import_accelerate_hooks_after_torch_s": round(statistics.median(accel_s), 3),
        "total_s": round(statistics.median(a + b for a, b in zip(torch_s, accel_s)), 3),
    }


def main():
    selected = ARGS.cases.split(",") if ARGS.cases else list(CASES)
    if "plain_tree" in selected and not os.path.exists(os.path.join(TREE, "hookfence_plain_hook.py")):
        selected.remove("plain_tree")
    summary = {
        "tree": TREE,
        "torch": torch.__version__,
        "accelerate": accelerate.__version__,
        "backend": ARGS.backend,
        "calls": ARGS.calls,
        "cases": {},
    }
    t0 = time.perf_counter()
    for name in selected:
        t = time.perf_counter()
        res = run_case(name, CASES[name])
        res["wall_s"] = round(time.perf_counter() - t, 2)
        summary["cases"][name] = res
        print(
            f"# {name}: equal={res.get('equal')} breaks={res.get('graph_breaks')} "
            f"in_hooks={res.get('breaks_in_hooks')} unsupported_in_hooks={res.get('unsupported_in_hooks')} "
            f"graphs={res.get('graphs')} recompiles={res.get('recompiles')} "
            f"error={res.get('error')} ({res['wall_s']}s)",
            file=sys.stderr,
        )
    summary["probes"] = {"cpu_offload_cpu0_eager": cpu0_eager_probe()}
    if not ARGS.no_import_time:
        summary["import_time"] = import_time()
    summary["wall_s"] = round(time.perf_counter() - t0, 2)
    text = json.dumps(summary, indent=2, sort_keys=False)
    if ARGS.json:
        with open(ARGS.json, "w") as fh:
            fh.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
