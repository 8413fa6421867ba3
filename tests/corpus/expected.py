#!/usr/bin/env python3
"""Before/after on the pinned corpus: what hookfence prints for the whole
corpus, compared with what it printed when the outputs were last accepted
(tests/corpus/expected/), or with another hookfence binary.

Usage:
  expected.py --hookfence BIN --tree TREE             compare with expected/
  expected.py --hookfence BIN --tree TREE --update    accept BIN's outputs
  expected.py --hookfence BIN --tree TREE --against OLD_BIN

The commands, each run in TREE on `.` (so paths are the corpus's own):
  list        --list --all-hooks --format json  (every site, status, reason,
              evidence, discounts, how it was found)
  diff        the dry run's diff (offload hooks only)
  all-hooks   the dry run's diff with --all-hooks
For each: stdout, stderr and the exit code must be the same. The JSON's
`tool.version` is left out (a release changes it, not a verdict).

An analysis change that is meant to keep every verdict must pass unchanged.
One that changes a verdict on purpose updates expected/ in its own commit,
which says which sites changed and why (the diff of expected/ shows them).
Prints `N passed, M failed` (one case per command and stream) and exits 1 if
anything differs.
"""

import argparse
import difflib
import json
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
EXPECTED = HERE / "expected"
COMMANDS = {
    "list": ["--list", "--all-hooks", "--format", "json", "."],
    "diff": ["."],
    "all-hooks": ["--all-hooks", "."],
}
# Lines of a difference shown per stream.
SHOWN = 60


def normalise(name, stream, text):
    if name == "list" and stream == "out":
        try:
            report = json.loads(text)
        except ValueError:
            return text
        report.get("tool", {}).pop("version", None)
        return json.dumps(report, indent=2, sort_keys=True) + "\n"
    return text


def outputs(binary, tree):
    """{(command, stream): text} for `binary` run in `tree`."""
    found = {}
    for name, args in COMMANDS.items():
        run = subprocess.run(
            [binary, *args],
            cwd=tree,
            capture_output=True,
            text=True,
            timeout=600,
        )
        found[(name, "out")] = normalise(name, "out", run.stdout)
        found[(name, "err")] = run.stderr
        found[(name, "code")] = f"{run.returncode}\n"
    return found


def path_of(name, stream):
    return EXPECTED / f"{name}.{stream}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hookfence", required=True)
    parser.add_argument("--tree", required=True)
    parser.add_argument("--update", action="store_true")
    parser.add_argument("--against", help="another hookfence binary")
    args = parser.parse_args()
    tree = pathlib.Path(args.tree)
    new = outputs(str(pathlib.Path(args.hookfence).resolve()), tree)
    if args.update:
        EXPECTED.mkdir(exist_ok=True)
        for (name, stream), text in new.items():
            path_of(name, stream).write_text(text)
        print(f"expected: wrote {len(new)} files to {EXPECTED}")
        return 0
    if args.against:
        old = outputs(str(pathlib.Path(args.against).resolve()), tree)
        label = args.against
    else:
        old = {}
        for key in new:
            path = path_of(*key)
            old[key] = path.read_text() if path.exists() else None
        label = "expected"
    passed = failed = 0
    for key, text in new.items():
        before = old[key]
        name, stream = key
        if before == text:
            passed += 1
            continue
        failed += 1
        print(f"FAIL {name} ({stream}): differs from {label}")
        if before is None:
            print(f"  no {path_of(*key)}; run with --update to accept")
            continue
        lines = list(
            difflib.unified_diff(
                before.splitlines(keepends=True),
                text.splitlines(keepends=True),
                f"{label}/{name}.{stream}",
                f"now/{name}.{stream}",
            )
        )
        sys.stdout.writelines(lines[:SHOWN])
        if len(lines) > SHOWN:
            print(f"  ... {len(lines) - SHOWN} more lines")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
