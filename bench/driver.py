#!/usr/bin/env python3
"""Benchmark driver for bench/run.sh.

  driver.py run --tree TREE --hookfence BIN --parse-only BIN --ast-grep BIN
                --sgconfig FILE [--runs N] [--out FILE] [--manifest HASH]
                [--copies DIR]
      Times every command N times in a fixed rotation (run 1 of each, then
      run 2 of each, ...), after one untimed warm-up pass under
      /usr/bin/time -v that checks exit codes and records peak RSS. Prints a
      Markdown report (machine, table, ratios, targets) and writes it to --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import resource
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

TIMEOUT_S = 900  # per command run; a hung command fails the benchmark


# --------------------------------------------------------------------------
# machine


# The partial-run row: the corpus's largest project, and one file of it
# that holds hooks (pre-commit passes the changed files only).
PARTIAL_PROJECT = "transformers"
PARTIAL_FILE = "transformers/modeling_utils.py"


def machine_info() -> dict[str, str]:
    info = {"nproc": str(os.cpu_count() or "?")}
    try:
        info["nproc"] = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info["cpu"] = cpu
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
                    break
    except OSError:
        pass
    info["memory"] = mem
    info["kernel"] = platform.release()
    return info


def load_average() -> tuple[float, float, float] | None:
    try:
        return os.getloadavg()
    except OSError:
        return None


def busy_cpu_seconds() -> float | None:
    """CPU time spent by everything on the machine so far (not idle, not iowait)."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def fmt_load(load: tuple[float, float, float] | None) -> str:
    return "?" if load is None else " ".join(f"{x:.2f}" for x in load)


def tool_version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "?"


# --------------------------------------------------------------------------
# measuring


@dataclass
class Command:
    key: str
    label: str
    argv: list[str]
    ok_codes: tuple[int, ...] = (0,)
    shell: bool = False
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    rss_kb: int | None = None
    note: str = ""

    def display(self) -> str:
        if self.shell:
            return self.argv[0]
        return " ".join(shlex.quote(a) for a in self.argv)


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_timed(cmd: Command) -> float:
    cpu_start = children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(
        cmd.argv if not cmd.shell else ["bash", "-c", cmd.argv[0]],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=TIMEOUT_S,
    )
    elapsed = time.perf_counter() - start
    cmd.cpu.append(children_cpu() - cpu_start)
    check_code(cmd, proc.returncode, proc.stderr)
    return elapsed


def check_code(cmd: Command, code: int, stderr: bytes) -> None:
    if code not in cmd.ok_codes:
        tail = stderr.decode(errors="replace").strip().splitlines()[-10:]
        sys.exit(
            f"bench: `{cmd.display()}` exited {code} (expected {cmd.ok_codes}):\n  "
            + "\n  ".join(tail)
        )


def run_rss(cmd: Command) -> tuple[int, str]:
    """One run under /usr/bin/time -v: peak RSS in KiB, and the command's stdout."""
    inner = cmd.argv if not cmd.shell else ["bash", "-c", cmd.argv[0]]
    proc = subprocess.run(
        ["/usr/bin/time", "-v", *inner],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        timeout=TIMEOUT_S,
    )
    check_code(cmd, proc.returncode, proc.stderr)
    m = re.search(rb"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    if not m:
        sys.exit(f"bench: no peak RSS from /usr/bin/time -v for `{cmd.display()}`")
    return int(m.group(1)), proc.stdout.decode(errors="replace")


# --------------------------------------------------------------------------
# report


def fmt_s(x: float) -> str:
    return f"{x:.3f}" if x < 10 else f"{x:.2f}"


def ratio_line(name: str, value: float | None, target: str, passed: bool | None) -> str:
    shown = "n/a" if value is None else f"{value:.2f}×"
    verdict = {True: "PASS", False: "FAIL", None: "n/a"}[passed]
    return f"| {name} | {shown} | {target} | {verdict} |"


def main_run(args: argparse.Namespace) -> None:
    tree = os.path.abspath(os.path.expanduser(args.tree))
    hf = args.hookfence
    q = shlex.quote
    help_text = subprocess.run([hf, "--help"], capture_output=True, text=True).stdout
    has_list = re.search(r"--list\b(?!-)", help_text) is not None

    cmds = [
        Command(
            "walk",
            "walk+read (find+cat)",
            [f"find {q(tree)} -name '*.py' -print0 | xargs -0 cat > /dev/null"],
            shell=True,
        ),
        Command("dry", "hookfence dry run", [hf, "-q", tree]),
        Command("check", "hookfence --check", [hf, "-q", "--check", tree], ok_codes=(0, 1)),
    ]
    if has_list:
        cmds.append(Command("list", "hookfence --list", [hf, "--list", tree], ok_codes=(0, 1)))
    cmds += [
        Command("parse", f"parse-only (tree-sitter, {os.cpu_count()} threads)", [args.parse_only, tree]),
        Command("j1", "hookfence --no-prefilter -j 1", [hf, "-q", "--no-prefilter", "-j", "1", tree]),
        Command("j2", "hookfence --no-prefilter -j 2", [hf, "-q", "--no-prefilter", "-j", "2", tree]),
        Command(
            "sg",
            "ast-grep scan (same rules)",
            [args.ast_grep, "scan", "-c", args.sgconfig, "--json=stream", tree],
        ),
    ]
    # A partial run, as pre-commit makes one: one file of the corpus's
    # largest project, with the rest of the project read for context.
    project = os.path.join(tree, PARTIAL_PROJECT)
    cmds.append(
        Command(
            "partial",
            f"partial run: one file of {PARTIAL_PROJECT}",
            [hf, "-q", "--project-root", project, os.path.join(project, PARTIAL_FILE)],
        )
    )
    if args.copies:
        copies = os.path.abspath(os.path.expanduser(args.copies))
        cmds.append(Command("x8", "hookfence dry run, 8 copies of the corpus", [hf, "-q", copies]))
    by_key = {c.key: c for c in cmds}

    info = machine_info()
    load_before = load_average()
    started = datetime.datetime.now(datetime.timezone.utc)

    def progress(msg: str) -> None:
        print(f"bench: {msg}", file=sys.stderr, flush=True)

    # Warm the page cache, then one untimed pass under /usr/bin/time -v: exit
    # codes, peak RSS, and what each tool found.
    run_timed(by_key["walk"])
    for cmd in cmds:
        progress(f"warm-up + peak RSS: {cmd.label}")
        cmd.rss_kb, out = run_rss(cmd)
        if cmd.key == "parse":
            cmd.note = out.strip()
        elif cmd.key == "sg":
            rules: dict[str, int] = {}
            for line in out.splitlines():
                if line.strip():
                    rid = json.loads(line).get("ruleId", "?")
                    rules[rid] = rules.get(rid, 0) + 1
            cmd.note = ", ".join(f"{k}={v}" for k, v in sorted(rules.items())) or "no matches"
        elif cmd.key == "check":
            cmd.note = f"{len(out.splitlines())} unfenced hooks listed"
    summary = subprocess.run([hf, tree], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    summary_line = (summary.stderr.strip().splitlines() or ["?"])[-1]

    busy_start, ours_start, wall_start = busy_cpu_seconds(), children_cpu(), time.perf_counter()
    for i in range(args.runs):
        progress(f"run {i + 1}/{args.runs}")
        for cmd in cmds:
            cmd.times.append(run_timed(cmd))
    busy_end, ours_end, wall_end = busy_cpu_seconds(), children_cpu(), time.perf_counter()
    # Share of the machine's CPU capacity used by other processes while the
    # timed runs went on: the noise floor of this report.
    other_share = None
    if busy_start is not None and busy_end is not None:
        capacity = (wall_end - wall_start) * (os.cpu_count() or 1)
        other = (busy_end - busy_start) - (ours_end - ours_start)
        other_share = max(other, 0.0) / capacity if capacity > 0 else None

    load_after = load_average()
    med = {c.key: statistics.median(c.times) for c in cmds}

    def ratio(a: str, b: str) -> float | None:
        return med[a] / med[b] if a in med and b in med and med[b] > 0 else None

    r_sg = ratio("sg", "dry")
    r_j2 = ratio("j2", "parse")
    r_x8 = med["x8"] / (8 * med["dry"]) if "x8" in med and med["dry"] > 0 else None
    r_parse = ratio("parse", "dry")
    r_walk = ratio("dry", "walk")
    r_scale = ratio("j1", "j2")
    rss_keys = [k for k in ("dry", "check", "list", "partial", "x8") if k in by_key]
    rss_mb = max(by_key[k].rss_kb or 0 for k in rss_keys) / 1024

    lines = []
    lines.append("# hookfence benchmark")
    lines.append("")
    lines.append(f"- date: {started.strftime('%Y-%m-%d %H:%M UTC')}")
    lines.append(
        f"- machine: {info['cpu']}, {info['nproc']} cores, {info['memory']} RAM, "
        f"Linux {info['kernel']}"
    )
    lines.append(f"- load average (1/5/15 min): before {fmt_load(load_before)}, after {fmt_load(load_after)}")
    lines.append(
        f"- corpus: {args.manifest or '?'} ({tree.replace(os.path.expanduser('~'), '~')})"
    )
    lines.append(f"- hookfence: {args.hookfence_rev or '?'}; its summary: {summary_line.replace(tree, 'TREE')}")
    lines.append(f"- ast-grep: {tool_version([args.ast_grep, '--version'])}; rules: bench/ast-grep/")
    lines.append(
        f"- {args.runs} timed runs per command, alternating in a fixed rotation after a "
        "warm-up pass (warm page cache); wall-clock median, min, max; stdout to /dev/null; "
        "peak RSS from `/usr/bin/time -v` (warm-up pass)"
    )
    if not has_list:
        lines.append("- `hookfence --list`: not in `--help`, not measured")
    if other_share is not None:
        lines.append(f"- other processes used {other_share:.0%} of the machine's CPU during the timed runs")
        if other_share > 0.10:
            lines.append(
                "- **warning: the machine was busy; wall times and ratios are noisy. "
                "CPU s (user+sys of the command) is less sensitive to contention.**"
            )
    lines.append("")
    lines.append("| command | median s | min s | max s | CPU s (median) | peak RSS MB | notes |")
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for c in cmds:
        shown = c.display().replace(tree, "TREE").replace(os.path.expanduser("~"), "~")
        shown = re.sub(r"\S*/target/release/(examples/)?", "", shown)
        shown = re.sub(r"\S*/bench-venv/bin/", "", shown)
        shown = re.sub(r"\S*/bench/ast-grep/", "bench/ast-grep/", shown)
        shown = shown.replace("|", "\\|")  # a pipe inside a table cell
        cpu = statistics.median(c.cpu[-len(c.times):])
        lines.append(
            f"| {c.label}: `{shown}` | {fmt_s(med[c.key])} | {fmt_s(min(c.times))} | "
            f"{fmt_s(max(c.times))} | {fmt_s(cpu)} | {(c.rss_kb or 0) / 1024:.1f} | {c.note} |"
        )
    lines.append("")
    lines.append("| ratio (medians, same run) | value | target | result |")
    lines.append("| --- | ---: | --- | --- |")
    lines.append(ratio_line("ast-grep / hookfence dry run", r_sg, "≥ 30×", None if r_sg is None else r_sg >= 30))
    lines.append(
        ratio_line("parse-only / hookfence dry run", r_parse, "≥ 20×", None if r_parse is None else r_parse >= 20)
    )
    lines.append(
        ratio_line("hookfence dry run / walk+read", r_walk, "≤ 1.5×", None if r_walk is None else r_walk <= 1.5)
    )
    lines.append(
        ratio_line(
            "`--no-prefilter -j 2` / parse-only", r_j2, "≤ 1.3×", None if r_j2 is None else r_j2 <= 1.3
        )
    )
    lines.append(
        ratio_line(
            "8 copies / (8 × dry run): linear in corpus size",
            r_x8,
            "≤ 1.1×",
            None if r_x8 is None else r_x8 <= 1.1,
        )
    )
    if "partial" in med:
        lines.append(
            f"| partial run (one file of {PARTIAL_PROJECT}, project for context) | "
            f"{fmt_s(med['partial'])} s | ≤ 0.5 s | {'PASS' if med['partial'] <= 0.5 else 'FAIL'} |"
        )
    lines.append(
        ratio_line(
            "scaling `--no-prefilter`: -j 1 / -j 2", r_scale, "≥ 1.7×", None if r_scale is None else r_scale >= 1.7
        )
    )
    lines.append(
        f"| peak RSS, hookfence ({', '.join(rss_keys)}) | {rss_mb:.1f} MB | ≤ 64 MB | "
        f"{'PASS' if rss_mb <= 64 else 'FAIL'} |"
    )
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        with open(args.out, "w") as f:
            f.write(report)
        progress(f"wrote {args.out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    rp = sub.add_parser("run")
    rp.add_argument("--tree", required=True)
    rp.add_argument("--hookfence", required=True)
    rp.add_argument("--hookfence-rev", default="")
    rp.add_argument("--parse-only", required=True)
    rp.add_argument("--ast-grep", required=True)
    rp.add_argument("--sgconfig", required=True)
    rp.add_argument("--runs", type=int, default=5)
    rp.add_argument("--manifest", default="")
    rp.add_argument("--out", default="")
    rp.add_argument("--copies", default="", help="a tree holding 8 copies of --tree")
    args = parser.parse_args()
    if args.runs < 1:
        sys.exit("bench: --runs must be at least 1")
    main_run(args)


if __name__ == "__main__":
    main()
