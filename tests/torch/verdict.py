#!/usr/bin/env python3
"""Judge the compile experiment's JSON summaries and tabulate the figures.

Usage: verdict.py --prefix PREFIX.json --fenced NAME=FILE.json [...]
                  [--checks CHECKS.txt] [--table OUT.md]

Checks (each appended to CHECKS.txt as "PASS name" / "FAIL name: why"):
- every fenced tree (one per strategy), for each accelerate case and the
  tree's plain hook: compiled outputs allclose to eager, no crash, zero graph
  breaks and zero Unsupported events inside hook bodies;
- the pristine tree, for the same cases: a crash or at least one break /
  Unsupported event inside a hook body (otherwise the experiment proves
  nothing);
- the script's own plain hook pair (from the pristine run): the unfenced one
  crashes or breaks inside its body, the fenced one behaves like a fenced tree;
- with --lazy NAME --eager NAME (the wrap strategy's tree, whose helper fences
  without importing torch._dynamo, against the decorate strategy's): the lazy
  tree's ``import accelerate.hooks`` does not pull in torch._dynamo, and in
  every case it costs no more graph breaks and no more graphs than the eager
  one.

Writes a Markdown table of the figures (graph breaks, breaks in hooks,
graphs, skipped frames, recompiles, first-call time, import time) to --table
and stdout.
"""

import argparse
import json
import sys

TREE_CASES = ["cpu_offload", "cpu_offload_hook", "layerwise_casting", "plain_tree"]


def load(path):
    with open(path) as fh:
        return json.load(fh)


class Checks:
    def __init__(self, path):
        self.path = path
        self.lines = []

    def add(self, name, ok, why=""):
        line = f"PASS {name}" if ok else f"FAIL {name}: {why}"
        self.lines.append(line)
        print(line)

    def flush(self):
        if self.path:
            with open(self.path, "a") as fh:
                for line in self.lines:
                    fh.write(line + "\n")


def in_hooks(case):
    return (case.get("breaks_in_hooks") or 0) + (case.get("unsupported_in_hooks") or 0)


def judge_fenced(checks, label, case_name, case):
    if case is None:
        checks.add(f"{label}/{case_name}", False, "case missing from the summary")
        return
    problems = []
    if case.get("error"):
        problems.append(f"crashed: {case['error']}")
    elif not case.get("equal"):
        problems.append(f"output differs from eager (max abs diff {case.get('max_abs_diff')})")
    if case.get("breaks_in_hooks"):
        problems.append(f"{case['breaks_in_hooks']} graph breaks inside hooks at {case.get('hook_break_sites')}")
    if case.get("unsupported_in_hooks"):
        problems.append(
            f"{case['unsupported_in_hooks']} Unsupported inside hooks at {case.get('hook_unsupported_sites')}"
        )
    checks.add(f"{label}/{case_name}: equal to eager, 0 breaks inside hooks", not problems, "; ".join(problems))


def judge_unfenced(checks, label, case_name, case):
    if case is None:
        checks.add(f"{label}/{case_name}", False, "case missing from the summary")
        return
    ok = bool(case.get("error")) or in_hooks(case) > 0
    checks.add(
        f"{label}/{case_name}: crashes or breaks inside hooks",
        ok,
        f"compiled cleanly with {case.get('graph_breaks')} breaks, none inside hooks: the experiment shows nothing",
    )


def fmt(v):
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def explained(case):
    ex = case.get("explain") or {}
    if "error" in ex:
        return "crash"
    return f"{fmt(ex.get('graph_count'))} / {fmt(ex.get('graph_break_count'))}"


def table(summaries):
    rows = [
        "| tree | case | result | graph breaks | in hooks (breaks / Unsupported) | graphs | frames skipped "
        "| recompiles | explain graphs / breaks | first call s | later calls ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, s in summaries:
        for name, c in s["cases"].items():
            frames = c.get("frames") or {}
            skipped = (frames.get("total", 0) - frames.get("ok", 0)) if frames else None
            if c.get("error"):
                result = "crash: " + c["error"].split(":", 2)[-1].strip()[:60]
            else:
                result = "= eager" if c.get("equal") else f"≠ eager ({fmt(c.get('max_abs_diff'))})"
            rows.append(
                f"| {label} | {name} | {result} | {fmt(c.get('graph_breaks'))} | "
                f"{fmt(c.get('breaks_in_hooks'))} / {fmt(c.get('unsupported_in_hooks'))} | {fmt(c.get('graphs'))} | "
                f"{fmt(skipped)} | {fmt(c.get('recompiles'))} | {explained(c)} | {fmt(c.get('first_call_s'))} "
                f"| {fmt(c.get('steady_call_ms'))} |"
            )
    rows += [
        "",
        "| tree | import torch s | then import accelerate.hooks s | total s | modules it adds | pulls in torch._dynamo |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for label, s in summaries:
        it = s.get("import_time")
        if it:
            rows.append(
                f"| {label} | {it['import_torch_s']} | {it['import_accelerate_hooks_after_torch_s']} | {it['total_s']} "
                f"| {it.get('modules_added_by_accelerate_hooks')} "
                f"| {'yes' if it.get('torch_dynamo_imported_by_accelerate_hooks') else 'no'} |"
            )
    rows += ["", "Break reasons (graph breaks, all trees):", ""]
    for label, s in summaries:
        for name, c in s["cases"].items():
            if c.get("break_reasons"):
                reasons = "; ".join(f"{k} ×{v}" for k, v in c["break_reasons"].items())
                rows.append(f"- {label}/{name}: {reasons}")
    return "\n".join(rows) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--fenced", action="append", default=[], metavar="NAME=FILE")
    ap.add_argument("--lazy", help="the tree fenced without importing torch._dynamo")
    ap.add_argument("--eager", help="the tree fenced with torch.compiler.disable")
    ap.add_argument("--checks")
    ap.add_argument("--table")
    args = ap.parse_args()

    checks = Checks(args.checks)
    prefix = load(args.prefix)
    summaries = [("prefix", prefix)]
    for name, case in ((n, prefix["cases"].get(n)) for n in TREE_CASES):
        judge_unfenced(checks, "prefix", name, case)
    judge_unfenced(checks, "script", "plain_unfenced", prefix["cases"].get("plain_unfenced"))
    judge_fenced(checks, "script", "plain_fenced", prefix["cases"].get("plain_fenced"))

    for spec in args.fenced:
        label, path = spec.split("=", 1)
        s = load(path)
        summaries.append((label, s))
        for name in TREE_CASES:
            judge_fenced(checks, label, name, s["cases"].get(name))

    by_label = dict(summaries)
    if args.lazy in by_label and args.eager in by_label:
        lazy, eager = by_label[args.lazy], by_label[args.eager]
        pulled = (lazy.get("import_time") or {}).get("torch_dynamo_imported_by_accelerate_hooks")
        checks.add(f"{args.lazy}: import accelerate.hooks does not pull in torch._dynamo", pulled is False,
                   f"pulls it in: {pulled}")
        for name in TREE_CASES:
            lc, ec = lazy["cases"].get(name) or {}, eager["cases"].get(name) or {}
            for figure in ("graph_breaks", "graphs"):
                lv, ev = lc.get(figure), ec.get(figure)
                checks.add(f"{args.lazy}/{name}: {figure} {lv} <= {args.eager}'s {ev}",
                           lv is not None and ev is not None and lv <= ev, "more than the eager fence")

    text = table(summaries)
    print()
    print(text)
    if args.table:
        with open(args.table, "w") as fh:
            fh.write(text)
    checks.flush()
    return 1 if any(line.startswith("FAIL") for line in checks.lines) else 0


if __name__ == "__main__":
    sys.exit(main())
