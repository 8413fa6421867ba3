#!/usr/bin/env python3
"""Judge the backward-hook experiment (compile_backward.py's JSON) and
tabulate its figures.

Usage: verdict_backward.py SUMMARY.json [--label L] [--checks CHECKS.txt]
                           [--table OUT.md]

hookfence lists backward hooks and does not fence them. These checks hold the
figures that decision rests on; if a torch release changes them, the tier
fails and the decision must be looked at again. Each is appended to
CHECKS.txt as "PASS name" / "FAIL name: why".

- hookfence left the file's hooks unfenced (no disable marker on either);
- variant copy, every configuration (hooks as written or fenced, with or
  without compiled autograd): no crash, every loss, gradient and weight equal
  to eager, each hook called as often as in eager;
- without compiled autograd, fencing changes nothing: the same graph breaks,
  Unsupported events, graphs and recompiles either way, and nothing dynamo
  refused lies inside a hook body (dynamo never traces module backward
  hooks there; the autograd engine runs them eagerly);
- with compiled autograd, the hooks as written are traced cleanly (0 graph
  breaks and 0 Unsupported inside hook bodies, 0 recompiles), and fencing
  them adds graph breaks.

Variant cast is tabulated, not judged (see RESULTS.md).
"""

import argparse
import json
import sys

MODES = ("compile", "compile_ca")
HOOKS = ("as_written", "fenced")


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


def same_figures(a, b):
    keys = ("graph_breaks", "unsupported", "graphs", "recompiles", "break_reasons", "unsupported_reasons")
    return {k: (a.get(k), b.get(k)) for k in keys if a.get(k) != b.get(k)}


def judge(checks, label, s):
    runs = s["runs"]
    fenced_in_file = [name for name, fenced in s.get("fenced_in_file", {}).items() if fenced]
    checks.add(
        f"{label}/backward: hookfence left both backward hooks unfenced",
        not fenced_in_file and len(s.get("fenced_in_file", {})) == 2,
        f"fenced in the file: {fenced_in_file or s.get('fenced_in_file')}",
    )
    for hooks in HOOKS:
        for mode in MODES:
            key = f"copy/{hooks}/{mode}"
            r = runs.get(key)
            if r is None:
                checks.add(f"{label}/backward {key}", False, "missing from the summary")
                continue
            why = r.get("error") or "; ".join(r.get("differences") or []) or "differs from eager"
            checks.add(f"{label}/backward {key}: equal to eager, hooks called as in eager", bool(r.get("equal")), why)

    plain, fenced = runs.get("copy/as_written/compile"), runs.get("copy/fenced/compile")
    if plain and fenced:
        diff = same_figures(plain, fenced)
        inside = plain.get("breaks_in_hooks", 0) + plain.get("unsupported_in_hooks", 0)
        checks.add(
            f"{label}/backward: without compiled autograd a fence changes nothing and no hook is traced",
            not diff and inside == 0 and not plain.get("error"),
            f"as written vs fenced differ in {diff}; {inside} events inside hook bodies",
        )
    plain, fenced = runs.get("copy/as_written/compile_ca"), runs.get("copy/fenced/compile_ca")
    if plain and fenced:
        inside = plain.get("breaks_in_hooks", 0) + plain.get("unsupported_in_hooks", 0)
        ok = (
            not plain.get("error")
            and inside == 0
            and plain.get("recompiles") == 0
            and plain.get("ca_captures", 0) > 0
            and fenced.get("graph_breaks", 0) > plain.get("graph_breaks", 0)
        )
        checks.add(
            f"{label}/backward: with compiled autograd the hooks trace cleanly and a fence adds graph breaks",
            ok,
            f"as written: {inside} events inside hooks, {plain.get('recompiles')} recompiles, "
            f"{plain.get('graph_breaks')} breaks, {plain.get('ca_captures')} captures; "
            f"fenced: {fenced.get('graph_breaks')} breaks",
        )


def fmt(v):
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def table(label, s):
    rows = [
        "| tree | variant | hooks | mode | result | graph breaks | in hooks (breaks / Unsupported) "
        "| Unsupported | graphs | recompiles | CA captures | first step s | later steps ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for key, r in s["runs"].items():
        parts = key.split("/")
        if len(parts) != 3:
            continue
        variant, hooks, mode = parts
        if r.get("error"):
            result = "crash: " + r["error"][:60]
        elif r.get("equal"):
            result = "= eager"
        else:
            result = f"≠ eager ({fmt(r.get('max_abs_diff'))})"
        rows.append(
            f"| {label} | {variant} | {hooks} | {mode} | {result} | {fmt(r.get('graph_breaks'))} "
            f"| {fmt(r.get('breaks_in_hooks'))} / {fmt(r.get('unsupported_in_hooks'))} | {fmt(r.get('unsupported'))} "
            f"| {fmt(r.get('graphs'))} | {fmt(r.get('recompiles'))} | {fmt(r.get('ca_captures'))} "
            f"| {fmt(r.get('first_step_s'))} | {fmt(r.get('steady_step_ms'))} |"
        )
    rows += ["", "Break reasons:", ""]
    for key, r in s["runs"].items():
        if r.get("break_reasons"):
            reasons = "; ".join(f"{k} ×{v}" for k, v in r["break_reasons"].items())
            rows.append(f"- {label}/{key}: {reasons}")
    return "\n".join(rows) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("summary")
    ap.add_argument("--label", default="tree")
    ap.add_argument("--checks")
    ap.add_argument("--table")
    args = ap.parse_args()
    with open(args.summary) as fh:
        s = json.load(fh)
    checks = Checks(args.checks)
    judge(checks, args.label, s)
    text = table(args.label, s)
    print()
    print(text)
    if args.table:
        with open(args.table, "w") as fh:
            fh.write(text)
    checks.flush()
    return 1 if any(line.startswith("FAIL") for line in checks.lines) else 0


if __name__ == "__main__":
    sys.exit(main())
