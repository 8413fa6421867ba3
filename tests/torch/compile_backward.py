#!/usr/bin/env python3
"""The backward-hook experiment: block swapping from backward hooks, trained
with torch.compile, with and without compiled autograd.

Usage: compile_backward.py TREE [--json OUT] [--steps N] [--backend B]
                           [--modes compile,compile_ca] [--variants copy,cast]

TREE holds ``hookfence_block_swap.py`` (tests/torch/block_swap.py copied in,
then run through ``hookfence --apply``). The model (an input layer, 4
residual blocks and a head, fixed seed) swaps its first 2 blocks from
``register_full_backward_pre_hook`` / ``register_full_backward_hook`` hooks.
Every configuration trains N SGD steps on the same batch from the same
initial weights; eager (no torch.compile, hooks as written) is the reference.

Variants (what a move does): ``copy`` keeps the dtype (a lossless copy, as a
GPU trainer's cuda <-> cpu move); ``cast`` stores offloaded weights as
bfloat16 (the ``.data`` assignment changes the dtype; lossy).

Hooks: ``as_written`` (the functions in the file, as hookfence left them) and
``fenced`` (``torch.compiler.disable()`` applied to each, which is what the
decorate strategy's ``@torch.compiler.disable()`` does).

Modes: ``compile`` (``torch.compile(model)``, default mode; backward by the
autograd engine) and ``compile_ca`` (the same inside
``torch._dynamo.compiled_autograd._enable(...)``, as its docstring shows for a
compiled model with an eager loss and backward; the backward graph is
compiled with the same backend).

Per configuration it records:

- ``equal``: every step's loss, every gradient and every weight after the
  step allclose to eager, and each block's hook call counts equal to eager's;
- ``graph_breaks``: dynamo's graph breaks (``GraphCompileReason``s with
  ``graph_break=True``), by reason; ``breaks_in_hooks``: those whose traced
  or live Python stack runs through a backward hook body;
- ``unsupported`` / ``unsupported_in_hooks``: the same for every
  ``torch._dynamo.exc.Unsupported``;
- ``graphs`` (``counters["stats"]["unique_graphs"]``), ``frames``,
  ``recompiles`` (frames dynamo converted after the first step: the same
  batch every step, so each one is a recompile after a guard failure),
  ``ca_captures`` / ``ca_compiles`` (``counters["compiled_autograd"]``);
- first-step and steady-state step times.

Prints one JSON document on stdout (and writes it to --json); the runs are
keyed ``VARIANT/HOOKS/MODE`` (and ``VARIANT/eager``).
"""

import argparse
import json
import os
import statistics
import sys
import time
import traceback


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("tree")
    ap.add_argument("--json", help="also write the summary here")
    ap.add_argument("--steps", type=int, default=3, help="training steps per mode")
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--modes", default="compile,compile_ca", help="compiled modes (eager always runs)")
    ap.add_argument("--variants", default="copy,cast")
    return ap.parse_args()


ARGS = parse_args()
TREE = os.path.abspath(ARGS.tree)
sys.path.insert(0, TREE)

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
import torch._dynamo.compiled_autograd as compiled_autograd  # noqa: E402
from torch._dynamo import exc as dynamo_exc  # noqa: E402
from torch._dynamo import output_graph  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

import hookfence_block_swap as block_swap  # noqa: E402

if not os.path.abspath(block_swap.__file__).startswith(TREE + os.sep):
    sys.exit(f"hookfence_block_swap imported from {block_swap.__file__}, not from {TREE}")

torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))

HOOK_NAMES = {"onload_before_backward", "offload_after_backward"}
SWAPPED = 2


# ---------------------------------------------------------------- hook frames
def is_hook_frame(filename, name):
    return name in HOOK_NAMES and (filename or "").endswith("hookfence_block_swap.py")


def hook_sites(user_stack):
    """Hook-body frames on the traced (user) stack and on the live stack."""
    sites = []
    for fs in user_stack or []:
        if is_hook_frame(fs.filename, fs.name):
            sites.append(f"{os.path.basename(fs.filename)}:{fs.lineno} {fs.name}")
    f = sys._getframe(2)
    while f is not None:
        code = f.f_code
        if is_hook_frame(code.co_filename, code.co_name):
            sites.append(f"{os.path.basename(code.co_filename)}:{f.f_lineno} {code.co_name} (live)")
        f = f.f_back
    return sites


EVENTS = []  # (kind, reason-head, [hook sites])


def _head(msg):
    return str(msg).strip().splitlines()[0][:160] if msg else ""


_orig_unsupported_init = dynamo_exc.Unsupported.__init__


def _unsupported_init(self, *a, **k):
    _orig_unsupported_init(self, *a, **k)
    stack = list(getattr(self, "real_stack", None) or [])
    EVENTS.append(("unsupported", _head(getattr(self, "msg", "")), hook_sites(stack)))


dynamo_exc.Unsupported.__init__ = _unsupported_init

_orig_post_init = output_graph.GraphCompileReason.__post_init__


def _post_init(self):
    _orig_post_init(self)
    if self.graph_break:
        EVENTS.append(("break", _head(self.reason), hook_sites(list(self.user_stack or []))))


output_graph.GraphCompileReason.__post_init__ = _post_init


def summarize(kind):
    evs = [e for e in EVENTS if e[0] == kind]
    by_reason = {}
    for _, head, _ in evs:
        by_reason[head] = by_reason.get(head, 0) + 1
    in_hooks = [e for e in evs if e[2]]
    return {
        "count": len(evs),
        "in_hooks": len(in_hooks),
        "by_reason": dict(sorted(by_reason.items(), key=lambda kv: -kv[1])),
        "hook_sites": sorted({s for e in in_hooks for s in e[2]}),
    }


# -------------------------------------------------------------------- training
def make_batch():
    g = torch.Generator().manual_seed(1)
    return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)


def train(mode):
    """Trains ARGS.steps steps; returns per-step records and the hook log."""
    torch.manual_seed(0)
    model = block_swap.attach(block_swap.SwapModel(), SWAPPED)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = make_batch()
    forward = model if mode == "eager" else torch.compile(model, backend=ARGS.backend)
    steps, times, frames_after_first = [], [], None

    def one_step():
        block_swap.onload_all(model)
        loss = torch.nn.functional.mse_loss(forward(x), y)
        block_swap.offload_swapped(model, SWAPPED)
        loss.backward()
        grads = {n: p.grad.detach().float().clone() for n, p in model.named_parameters()}
        block_swap.onload_all(model)
        opt.step()
        opt.zero_grad(set_to_none=True)
        weights = {n: p.detach().float().clone() for n, p in model.named_parameters()}
        return {"loss": float(loss), "grads": grads, "weights": weights}

    for i in range(ARGS.steps):
        t0 = time.perf_counter()
        if mode == "compile_ca":
            backend = ARGS.backend
            with compiled_autograd._enable(lambda gm: torch.compile(gm, backend=backend)):
                steps.append(one_step())
        else:
            steps.append(one_step())
        times.append(time.perf_counter() - t0)
        if i == 0:
            frames_after_first = int(counters["frames"]["total"])
    log = [block.swap_calls.tolist() for block in model.blocks]
    return steps, log, times, frames_after_first


def compare(steps, ref):
    """Differences from eager: a list of what differs (empty when equal)."""
    problems = []
    for i, (s, r) in enumerate(zip(steps, ref)):
        if abs(s["loss"] - r["loss"]) > 1e-5 * max(1.0, abs(r["loss"])):
            problems.append(f"step {i}: loss {s['loss']} vs eager {r['loss']}")
        for kind in ("grads", "weights"):
            for name, t in r[kind].items():
                got = s[kind].get(name)
                if got is None or got.shape != t.shape or not torch.allclose(got, t, rtol=1e-4, atol=1e-6):
                    diff = float((got - t).abs().max()) if got is not None and got.shape == t.shape else None
                    problems.append(f"step {i}: {kind[:-1]} {name} differs (max abs diff {diff})")
    return problems


def max_diff(steps, ref):
    d = 0.0
    for s, r in zip(steps, ref):
        for kind in ("grads", "weights"):
            for name, t in r[kind].items():
                d = max(d, float((s[kind][name] - t).abs().max()))
    return d


def reset_dynamo():
    torch._dynamo.reset()
    counters.clear()
    EVENTS.clear()


def run_mode(mode, ref):
    out = {"mode": mode}
    reset_dynamo()
    try:
        steps, log, times, frames_after_first = train(mode)
    except Exception as e:  # noqa: BLE001
        out["error"] = f"{type(e).__name__}: {_head(e)}"
        out["traceback_tail"] = traceback.format_exc().strip().splitlines()[-8:]
        steps, log, times, frames_after_first = None, None, [], None
    breaks, unsup = summarize("break"), summarize("unsupported")
    out.update(
        {
            "hook_calls": log,
            "graph_breaks": breaks["count"],
            "breaks_in_hooks": breaks["in_hooks"],
            "unsupported": unsup["count"],
            "unsupported_in_hooks": unsup["in_hooks"],
            "graphs": int(counters["stats"]["unique_graphs"]),
            "frames": dict(counters["frames"]),
            "recompiles": (
                int(counters["frames"]["total"]) - frames_after_first if frames_after_first is not None else None
            ),
            "ca_captures": int(counters["compiled_autograd"]["captures"]),
            "ca_compiles": int(counters["compiled_autograd"]["compiles"]),
            "first_step_s": round(times[0], 3) if times else None,
            "steady_step_ms": round(1000 * statistics.median(times[1:]), 3) if len(times) > 1 else None,
            "break_reasons": breaks["by_reason"],
            "hook_break_sites": breaks["hook_sites"],
            "unsupported_reasons": unsup["by_reason"],
            "hook_unsupported_sites": unsup["hook_sites"],
        }
    )
    if steps is not None and ref is not None:
        steps_data, ref_steps, ref_log = steps, ref[0], ref[1]
        problems = compare(steps_data, ref_steps)
        if log != ref_log:
            problems.append(f"hook calls differ: {log} vs eager {ref_log}")
        out["equal"] = not problems
        out["differences"] = problems[:6]
        out["max_abs_diff"] = max_diff(steps_data, ref_steps)
    else:
        out["equal"] = steps is not None and "error" not in out
    reset_dynamo()
    return out, (steps, log) if steps is not None else None


VARIANTS = {
    # Same dtype both ways: every move a lossless copy (the GPU trainer's
    # cuda <-> cpu move keeps the dtype too). Checked against eager.
    "copy": torch.float32,
    # Offloaded weights stored as bfloat16: the `.data` assignment changes
    # the dtype, and the round trip is lossy. Figures only (see RESULTS.md).
    "cast": torch.bfloat16,
}


def set_fence(fenced):
    """The hooks as written, or fenced the way hookfence's decorate strategy
    would fence them: ``torch.compiler.disable()`` applied to each function,
    which is what ``@torch.compiler.disable()`` above its def does."""
    for name in HOOK_NAMES:
        fn = ORIGINAL_HOOKS[name]
        setattr(block_swap, name, torch.compiler.disable()(fn) if fenced else fn)


ORIGINAL_HOOKS = {name: getattr(block_swap, name) for name in HOOK_NAMES}


def main():
    modes = ARGS.modes.split(",")
    summary = {
        "tree": TREE,
        "torch": torch.__version__,
        "backend": ARGS.backend,
        "steps": ARGS.steps,
        "swapped_blocks": SWAPPED,
        # Whether the file under test already carries a fence (hookfence
        # leaves backward hooks unfenced, so this should be all false).
        "fenced_in_file": {
            name: bool(getattr(fn, "_torchdynamo_disable", False)) for name, fn in sorted(ORIGINAL_HOOKS.items())
        },
        "runs": {},
    }
    t0 = time.perf_counter()
    for variant in ARGS.variants.split(","):
        block_swap.STORAGE_DTYPE = VARIANTS[variant]
        set_fence(False)
        res, ref = run_mode("eager", None)
        if ref is None:
            sys.exit(f"{variant}: eager training failed: {res.get('error')}")
        summary["runs"][f"{variant}/eager"] = res
        for hooks in ("as_written", "fenced"):
            set_fence(hooks == "fenced")
            for mode in modes:
                t = time.perf_counter()
                res, _ = run_mode(mode, ref)
                res["wall_s"] = round(time.perf_counter() - t, 2)
                key = f"{variant}/{hooks}/{mode}"
                summary["runs"][key] = res
                print(
                    f"# {key}: equal={res.get('equal')} breaks={res.get('graph_breaks')} "
                    f"in_hooks={res.get('breaks_in_hooks')} unsupported={res.get('unsupported')} "
                    f"unsupported_in_hooks={res.get('unsupported_in_hooks')} graphs={res.get('graphs')} "
                    f"recompiles={res.get('recompiles')} ca_captures={res.get('ca_captures')} "
                    f"hook_calls={res.get('hook_calls')} error={res.get('error')} ({res['wall_s']}s)",
                    file=sys.stderr,
                )
        set_fence(False)
    summary["wall_s"] = round(time.perf_counter() - t0, 2)
    text = json.dumps(summary, indent=2)
    if ARGS.json:
        with open(ARGS.json, "w") as fh:
            fh.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
