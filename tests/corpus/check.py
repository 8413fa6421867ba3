#!/usr/bin/env python3
"""Corpus tier: hookfence --all-hooks --apply over a whole tree of real Python,
checked file by file against a pristine copy.

Usage: check.py --bin HOOKFENCE --corpus TREE --work DIR [--variants LIST]

TREE is left alone. Each variant (default `plain,crlf,tabs-bom`: the corpus
as is; with CRLF line endings; tab-indented with a BOM and no final newline)
is copied to DIR/source and checked in two more copies:
  DIR/apply        the tree after `--all-hooks --apply` (the run under test)
  DIR/noprefilter  the tree after the same run with `--no-prefilter` (every
                   file parsed, so every file tree-sitter rejects is named)

For every file, in both runs:
  * a file reported as an error is byte-identical to the original;
  * a changed file is exactly the original with the edits the run reported
    (`--format json`) applied, and, checked independently of those: the
    original is a subsequence of the new bytes, and every added line is a
    fence form hookfence writes (`@torch.compiler.disable()`, `import torch`)
    and every changed line a lambda wrapped in `torch.compiler.disable(...)`;
  * a changed file compiles with CPython (`compile()`, which enforces what
    `ast.parse` does not, such as where `from __future__` imports stand)
    whenever the original did;
  * an unchanged file is byte-identical, and no file appears or disappears
    (no `.hookfence-*.tmp` left behind).
Then a sample of the changed files (up to IMPORT_SAMPLE, the same ones on
every run) is imported, each alone in a fresh interpreter, against a stub
`torch` (a tiny package providing `compiler.disable` and standing in for
everything else): every file whose original imports must import rewritten.
Then, on the whole tree: the two runs give the same tree; a second `--apply`
plans nothing and changes no byte; `--check --all-hooks` exits 0 (2 if some
files cannot be processed: those are then the only errors).

Prints the counts (files, hooks fenced, files skipped and why) and ends with
`N passed, M failed` alone on a line: one case per corpus file and variant,
plus one per whole-tree check. Exit status 1 if anything failed.
"""

import argparse
import ast
import collections
import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import warnings

FENCE_LINES = {"@torch.compiler.disable()", "import torch"}
WRAP_OPEN = b"torch.compiler.disable("


def walk(root):
    """Every entry below root (relative path -> bytes for files, a tag otherwise)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path))
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    out[rel] = f.read()
            else:
                out[rel] = ("other",)
    return out


def tree_digest(files):
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        value = files[rel]
        h.update(hashlib.sha256(value if isinstance(value, bytes) else repr(value).encode()).digest())
    return h.hexdigest()


def ast_ok(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(data)
            return True
        except (SyntaxError, ValueError):
            return False


def compile_ok(data, name="<corpus>"):
    """Whether CPython compiles the bytes (syntax and the compiler's own
    checks: `from __future__` placement, `return` outside a function...)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(data, name, "exec", dont_inherit=True)
            return True
        except (SyntaxError, ValueError):
            return False


IMPORT_SAMPLE = 40

STUB_TORCH = {
    "torch/__init__.py": (
        '"""A stand-in for torch: `compiler.disable`, and anything else as a\n'
        'permissive dummy, so that a module that only needs torch to import does."""\n'
        "from . import compiler\n"
        "\n"
        "\n"
        "class _Any:\n"
        "    def __init__(self, *args, **kwargs):\n"
        "        pass\n"
        "\n"
        "    def __call__(self, *args, **kwargs):\n"
        "        return _Any()\n"
        "\n"
        "    def __getattr__(self, name):\n"
        "        return _Any()\n"
        "\n"
        "    def __mro_entries__(self, bases):\n"
        "        return (object,)\n"
        "\n"
        "\n"
        "def __getattr__(name):\n"
        "    return _Any()\n"
    ),
    "torch/compiler.py": (
        "def disable(fn=None, recursive=True):\n"
        "    if fn is None:\n"
        "        return lambda f: f\n"
        "    return fn\n"
    ),
}

IMPORT_ONE = (
    "import importlib.util, sys\n"
    "spec = importlib.util.spec_from_file_location('hookfence_sample', sys.argv[1])\n"
    "module = importlib.util.module_from_spec(spec)\n"
    "sys.modules['hookfence_sample'] = module\n"
    "spec.loader.exec_module(module)\n"
)


def imports_alone(path, stub_dir):
    """Whether the file at path imports on its own, with the stub torch first
    on the path; None if it did not finish in time."""
    env = dict(os.environ, PYTHONPATH=stub_dir, PYTHONDONTWRITEBYTECODE="1")
    try:
        proc = subprocess.run([sys.executable, "-c", IMPORT_ONE, path], cwd=stub_dir, env=env,
                              capture_output=True, timeout=30)
    except subprocess.TimeoutExpired:
        return None
    return proc.returncode == 0


def import_sample(source_dir, apply_dir, changed, work):
    """Problems of the import check on a fixed sample of changed files, and
    how many of the sample imported before the rewrite."""
    stub_dir = os.path.join(work, "stub-torch")
    for rel, text in STUB_TORCH.items():
        os.makedirs(os.path.dirname(os.path.join(stub_dir, rel)), exist_ok=True)
        with open(os.path.join(stub_dir, rel), "w") as f:
            f.write(text)
    sample = sorted(changed, key=lambda r: hashlib.sha256(r.encode("utf-8", "surrogateescape")).digest())
    sample = sorted(sample[:IMPORT_SAMPLE])
    problems = []
    importable = 0
    for rel in sample:
        if imports_alone(os.path.join(source_dir, rel), stub_dir) is not True:
            continue
        importable += 1
        if imports_alone(os.path.join(apply_dir, rel), stub_dir) is not True:
            problems.append(f"{rel} imports before the rewrite but not after it")
    return problems, importable, len(sample)


def is_subsequence(old, new):
    """Whether every byte of old appears in new, in order (greedy is exact)."""
    i = 0
    n = len(old)
    if n == 0:
        return True
    for b in new:
        if b == old[i]:
            i += 1
            if i == n:
                return True
    return False


def only_fence_changes(old, new):
    """None if new is old plus fence forms only, else a description."""
    old_lines = old.splitlines(keepends=True)
    new_lines = new.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if tag == "delete":
            return f"line {i1 + 1} removed: {old_lines[i1]!r}"
        if tag == "insert":
            for line in new_lines[j1:j2]:
                text = line.strip().decode("latin-1")
                if text not in FENCE_LINES:
                    return f"unexpected added line {j1 + 1}: {line!r}"
            continue
        # replace: the same lines with lambdas wrapped, plus whole fence lines.
        before = b"".join(old_lines[i1:i2])
        after_lines = [l for l in new_lines[j1:j2] if l.strip().decode("latin-1") not in FENCE_LINES]
        after = b"".join(after_lines)
        wraps = after.count(WRAP_OPEN + b"lambda")
        unwrapped = after.replace(WRAP_OPEN + b"lambda", b"lambda")
        if wraps == 0 or len(unwrapped) - len(before) != wraps or not is_subsequence(before, unwrapped):
            return f"lines {i1 + 1}-{i2} changed into something that is no lambda wrap: {after[:200]!r}"
        if sorted(unwrapped) != sorted(before + b")" * wraps):
            return f"lines {i1 + 1}-{i2}: a wrap adds more than its ')'"
    return None


def apply_edits(old, sites):
    """The original with every reported edit applied, last offset first."""
    edits = []
    for site in sites:
        for e in site.get("edits") or []:
            edit = (e["start"], e["end"], e["insert"].encode("utf-8"))
            # Sites of one file share the `import torch` edit: it is
            # reported with each and applied once (as hookfence applies it).
            if edit not in edits:
                edits.append(edit)
    # Stable: at one offset, edits keep their reported order.
    out = bytearray(old)
    for start, end, insert in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        out[start:end] = insert
    return bytes(out)


def run(cmd, cwd):
    t = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True)
    return proc, time.monotonic() - t


def reason_of(message):
    """An error message without its path and position: the kind of failure."""
    msg = re.sub(r"^.*?\.py(:\d+:\d+)?: ", "", message)
    msg = re.sub(r'near ".*"', 'near "..."', msg)
    msg = re.sub(r"\(.*\)", "(...)", msg)
    return msg


class Checker:
    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.failures = []

    def case(self, name, problems):
        if problems:
            self.failed += 1
            for p in problems:
                self.failures.append(f"{name}: {p}")
        else:
            self.passed += 1


def check_run(label, pristine, after, doc, problems_by_file, stats):
    """Per-file checks of one --apply run, added to problems_by_file.
    Returns the changed files."""
    errors = {e["path"]: e["message"] for e in doc["errors"]}
    sites_by_path = collections.defaultdict(list)
    for site in doc["sites"]:
        if site["status"] == "unfenced":
            sites_by_path[site["path"]].append(site)
    changed = []
    for rel in sorted(set(pristine) | set(after)):
        problems = []
        old = pristine.get(rel)
        new = after.get(rel)
        if old is None:
            problems.append(f"[{label}] new file appeared: {rel}")
        elif new is None:
            problems.append(f"[{label}] file disappeared")
        elif not isinstance(old, bytes) or not isinstance(new, bytes):
            if old != new:
                problems.append(f"[{label}] non-file entry changed: {old!r} -> {new!r}")
        elif rel in errors:
            if new != old:
                problems.append(f"[{label}] reported as an error ({errors[rel]}) but changed")
        elif rel in sites_by_path:
            expected = apply_edits(old, sites_by_path[rel])
            if new != expected:
                problems.append(f"[{label}] bytes differ from the original plus the reported edits")
            if not is_subsequence(old, new):
                problems.append(f"[{label}] an original byte is missing")
            why = only_fence_changes(old, new)
            if why:
                problems.append(f"[{label}] {why}")
            if new != old:
                changed.append(rel)
                if ast_ok(old):
                    stats["ast_checked"] += 1
                    if not ast_ok(new):
                        problems.append(f"[{label}] python's ast parsed the original but rejects the output")
                if compile_ok(old, rel):
                    stats["compile_checked"] += 1
                    if not compile_ok(new, rel):
                        problems.append(f"[{label}] CPython compiled the original but not the output")
        elif new != old:
            problems.append(f"[{label}] changed although no edit was reported for it")
        problems_by_file[rel].extend(problems)
    return changed


def make_variant(variant, corpus, dest):
    """A copy of the corpus, varied: `plain` as is; `crlf` every LF as CRLF;
    `tabs-bom` leading four-space groups as tabs, a UTF-8 BOM, no final
    newline. Files a variation breaks are fine: they must then be reported
    and left alone like any file that does not parse."""
    if os.path.exists(dest):
        shutil.rmtree(dest)
    shutil.copytree(corpus, dest, symlinks=True)
    if variant == "plain":
        return
    for dirpath, _, filenames in os.walk(dest):
        for name in filenames:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                data = f.read()
            if variant == "crlf":
                if b"\r" in data:
                    continue
                data = data.replace(b"\n", b"\r\n")
            elif variant == "tabs-bom":
                lines = data.rstrip(b"\n").split(b"\n")
                out = []
                for line in lines:
                    groups = (len(line) - len(line.lstrip(b" "))) // 4
                    out.append(b"\t" * groups + line[4 * groups:])
                data = b"\xef\xbb\xbf" + b"\n".join(out)
            else:
                raise SystemExit(f"unknown variant {variant!r}")
            with open(path, "wb") as f:
                f.write(data)


def check_variant(variant, hookfence, corpus, work, checker):
    """Every check on one variant of the corpus; prints its counts."""
    t0 = time.monotonic()
    stats = collections.Counter()
    source = os.path.join(work, "source")
    make_variant(variant, corpus, source)
    pristine = walk(source)
    py_files = [r for r, v in pristine.items() if isinstance(v, bytes) and r.endswith(".py")]
    print(f"== variant {variant}: {len(py_files)} .py files, "
          f"{sum(len(pristine[r]) for r in py_files)} bytes, tree sha256 {tree_digest(pristine)[:16]}")

    runs = {}
    problems_by_file = collections.defaultdict(list)
    for label, extra in (("apply", []), ("noprefilter", ["--no-prefilter"])):
        dest = os.path.join(work, label)
        if os.path.exists(dest):
            shutil.rmtree(dest)
        shutil.copytree(source, dest, symlinks=True)
        cmd = [hookfence, "--all-hooks", "--apply", "--allow-dirty", "--format", "json", *extra, "."]
        proc, secs = run(cmd, dest)
        try:
            doc = json.loads(proc.stdout)
        except json.JSONDecodeError:
            print(f"[{variant}/{label}] hookfence printed no JSON (exit {proc.returncode}):\n"
                  f"{proc.stderr.decode(errors='replace')[-3000:]}")
            checker.case(f"<{variant}: {label} run>", ["no JSON document"])
            doc = {"errors": [], "sites": [], "summary": {}}
        expected_code = 2 if doc["errors"] else 0
        problems = []
        if proc.returncode != expected_code:
            problems.append(f"exit {proc.returncode}, expected {expected_code}")
        checker.case(f"<{variant}: {label} run exit code>", problems)
        after = walk(dest)
        changed = check_run(label, pristine, after, doc, problems_by_file, stats)
        runs[label] = (dest, doc, after, changed, secs)
        print(f"[{label}] hookfence {' '.join(cmd[1:])}: exit {proc.returncode} in {secs:.1f}s, "
              f"{len(changed)} files changed")

    for rel in sorted(set(pristine) | set(problems_by_file)):
        checker.case(f"{variant}: {rel}", problems_by_file[rel])

    apply_dir, doc, after, changed, _ = runs["apply"]
    noprefilter_after = runs["noprefilter"][2]

    # The prefilter may only skip parsing files that cannot matter.
    diff = [r for r in set(after) | set(noprefilter_after) if after.get(r) != noprefilter_after.get(r)]
    checker.case(f"<{variant}: same tree with and without the prefilter>",
                 [f"{len(diff)} files differ, e.g. {sorted(diff)[:5]}"] if diff else [])
    extra_errors = {e["path"] for e in runs["noprefilter"][1]["errors"]} - {e["path"] for e in doc["errors"]}
    # Without the prefilter every file is parsed: more files may fail to parse,
    # but only files the prefilter rightly skipped (they change in neither run).
    checker.case(f"<{variant}: errors only --no-prefilter finds are in files left alone>",
                 [f"{r} changed" for r in sorted(extra_errors) if after.get(r) != pristine.get(r)])

    # A sample of the rewritten files imports wherever its original did.
    problems, importable, sampled = import_sample(source, apply_dir, changed, work)
    checker.case(f"<{variant}: sampled files import after the rewrite where they did before>", problems)
    print(f"imports: {importable} of {sampled} sampled changed files import alone against stub torch; "
          f"{importable - len(problems)} of them still do after the rewrite")

    # Second run: plans nothing, changes no byte.
    digest = tree_digest(after)
    cmd = [hookfence, "--all-hooks", "--apply", "--allow-dirty", "--format", "json", "."]
    proc, secs = run(cmd, apply_dir)
    problems = []
    try:
        second = json.loads(proc.stdout)
        planned = [s for s in second["sites"] if s["status"] == "unfenced"]
        if planned:
            problems.append(f"{len(planned)} hooks planned again, e.g. {planned[0]['path']}:{planned[0]['line']}")
        if {e["path"] for e in second["errors"]} != {e["path"] for e in doc["errors"]}:
            problems.append("the second run reports other errors than the first")
    except json.JSONDecodeError:
        problems.append(f"no JSON (exit {proc.returncode})")
    if tree_digest(walk(apply_dir)) != digest:
        problems.append("the second --apply changed bytes on disk")
    checker.case(f"<{variant}: second --apply plans nothing>", problems)

    proc, _ = run([hookfence, "--all-hooks", "--check", "-q", "."], apply_dir)
    expected_code = 2 if doc["errors"] else 0
    checker.case(f"<{variant}: --check --all-hooks passes after --apply>",
                 [] if proc.returncode == expected_code
                 else [f"exit {proc.returncode}, expected {expected_code}: {proc.stdout[:500]!r}"])

    # Counts.
    summary = doc.get("summary", {})
    print(f"files: {summary.get('files_scanned')} scanned, {len(changed)} changed "
          f"(each parsed by python's ast and compiled by CPython before and after; "
          f"{stats['compile_checked']} compile checks)")
    print(f"hooks: {summary.get('unfenced')} fenced, {summary.get('fenced')} already fenced, "
          f"{summary.get('not_offload')} not offload, {summary.get('suppressed')} suppressed, "
          f"{summary.get('opted_out')} opted out, {summary.get('unresolved')} registrations unresolved")
    for label in ("apply", "noprefilter"):
        errs = runs[label][1]["errors"]
        why = collections.Counter(reason_of(e["message"]) for e in errs)
        detail = "; ".join(f"{n} {r}" for r, n in why.most_common()) or "none"
        print(f"skipped [{label}]: {len(errs)} files ({detail})")
        for e in errs[:20]:
            print(f"  {e['message']}")
        if len(errs) > 20:
            print(f"  ... and {len(errs) - 20} more")
    print(f"time: {time.monotonic() - t0:.1f}s")
    for label in ("apply", "noprefilter", "source"):
        shutil.rmtree(os.path.join(work, label), ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--variants", default="plain,crlf,tabs-bom",
                        help="comma-separated: plain, crlf, tabs-bom")
    args = parser.parse_args()

    hookfence = os.path.abspath(args.bin)
    corpus = os.path.abspath(args.corpus)
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    checker = Checker()
    corpus_hash = tree_digest(walk(corpus))
    print(f"corpus: {corpus} (tree sha256 {corpus_hash})")
    for variant in args.variants.split(","):
        check_variant(variant.strip(), hookfence, corpus, work, checker)
    checker.case("<the corpus itself is untouched>",
                 [] if tree_digest(walk(corpus)) == corpus_hash else ["the corpus changed"])

    for failure in checker.failures[:200]:
        print(f"FAIL {failure}")
    if len(checker.failures) > 200:
        print(f"... and {len(checker.failures) - 200} more")
    print(f"{checker.passed} passed, {checker.failed} failed")
    return 1 if checker.failed else 0


if __name__ == "__main__":
    sys.exit(main())
