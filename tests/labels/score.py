#!/usr/bin/env python3
"""Accuracy of hookfence on the labelled hook sites of released packages.

Usage:
  score.py --hookfence BIN                 score every package, hold the floor
  score.py --hookfence BIN --package NAME  one package (the floor is not held)
  score.py --hookfence BIN --update-floor  write today's figures to floor.json
  score.py --self-test                     a perfect stub passes, an empty one fails

Each package of packages/*.json is downloaded once (pip, no dependencies) into
$HOOKFENCE_CACHE/labels (default ~/.cache/hookfence/labels), checked against its
sha256 and unpacked there. hookfence runs in the package's `root`, twice:
`--list --format json --all-hooks .` (which sites it sees at all) and
`--list --format json .` (what it calls offload).

A labelled site is matched to a listed one by path and qualname (and line, where
a qualname repeats), else by path and line; a registration hookfence could not
follow (`unresolved`) matches the site registered there.

  recall     offload-labelled sites (not in tests) that hookfence calls offload
             (unfenced, fenced, backward, covered) or leaves alone because the
             authors marked them (opted-out, suppressed), over all of them
  precision  sites hookfence calls offload (unfenced, backward) that are
             labelled offload or either, over those it calls offload that carry a
             label (a fence already there is the authors' call, not hookfence's)

Prints every disagreement with hookfence's reason and the label's, a table per
package, then `recall R/N (r), precision P/M (p)`. Exits 1 when recall or
precision is below floor.json, 2 when a package cannot be fetched or hookfence
prints no JSON.
"""

import argparse
import hashlib
import json
import math
import os
import pathlib
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import zipfile

HERE = pathlib.Path(__file__).resolve().parent
PACKAGES = HERE / "packages"
FLOOR = HERE / "floor.json"
# Verdicts hookfence makes: offload, fenced or not. `fenced`, `opted-out` and
# `suppressed` honour a marker the authors wrote (hookfence fences nothing
# there whatever it thinks), and `covered` gets no fence of its own: they
# count as found, never as verdicts.
OFFLOAD = {"unfenced", "backward"}
FOUND = OFFLOAD | {"fenced", "covered", "opted-out", "suppressed"}


def die(message):
    print("labels: error: " + message, file=sys.stderr)
    sys.exit(2)


def cache_dir():
    base = os.environ.get("HOOKFENCE_CACHE") or os.path.join(pathlib.Path.home(), ".cache", "hookfence")
    return pathlib.Path(base) / "labels"


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download_pinned(package, artifact):
    """Downloads the pinned file itself from PyPI's simple index (the page
    of the project names each file's URL): no build step, so an sdist whose
    metadata cannot be built here downloads too. False where that fails
    (pip is tried next)."""
    import html
    import re
    import urllib.parse
    import urllib.request
    index = "https://pypi.org/simple/%s/" % package["name"]
    try:
        with urllib.request.urlopen(index, timeout=60) as response:
            page = response.read().decode("utf-8", "replace")
        url = None
        for href in re.findall(r'href="([^"]+)"', page):
            href = html.unescape(href)
            if urllib.parse.urlsplit(href).path.rsplit("/", 1)[-1] == package["file"]:
                url = urllib.parse.urljoin(index, href.split("#", 1)[0])
                break
        if url is None:
            return False
        partial = artifact.with_name(artifact.name + ".part")
        with urllib.request.urlopen(url, timeout=300) as response, open(partial, "wb") as out:
            shutil.copyfileobj(response, out)
        partial.replace(artifact)
        return True
    except (OSError, ValueError):
        return False


def fetch(package):
    """The unpacked package (its `root`), downloading and unpacking it once."""
    cache = cache_dir()
    unpacked = cache / ("%s-%s" % (package["name"], package["version"]))
    done = unpacked / ".hookfence-unpacked"
    if not done.exists() or done.read_text().strip() != package["sha256"]:
        artifact = cache / "dl" / package["file"]
        if not artifact.exists() or sha256(artifact) != package["sha256"]:
            artifact.parent.mkdir(parents=True, exist_ok=True)
            if not download_pinned(package, artifact):
                binary = ["--only-binary", ":all:"] if package["artifact"] == "wheel" else ["--no-binary", ":all:", "--no-build-isolation"]
                with tempfile.TemporaryDirectory() as tmp:
                    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", *binary,
                           "%s==%s" % (package["name"], package["version"]), "-d", tmp]
                    run = subprocess.run(cmd, capture_output=True, text=True)
                    got = pathlib.Path(tmp) / package["file"]
                    if not got.exists():
                        die("cannot download %s %s: %s" % (package["name"], package["version"], (run.stderr or run.stdout)[-600:]))
                    shutil.move(str(got), artifact)
        if sha256(artifact) != package["sha256"]:
            die("%s: sha256 %s, pinned %s" % (artifact, sha256(artifact), package["sha256"]))
        if unpacked.exists():
            shutil.rmtree(unpacked)
        unpacked.mkdir(parents=True)
        if package["artifact"] == "wheel":
            with zipfile.ZipFile(artifact) as z:
                z.extractall(unpacked)
        else:
            with tarfile.open(artifact) as t:
                t.extractall(unpacked, filter="data")
        done.write_text(package["sha256"] + "\n")
    return unpacked / package["root"]


def listed(binary, root, all_hooks):
    cmd = [binary, "--list", "--format", "json"] + (["--all-hooks"] if all_hooks else []) + ["."]
    run = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=900)
    try:
        doc = json.loads(run.stdout)
    except ValueError:
        die("%s in %s printed no JSON (exit %s): %s" % (" ".join(cmd), root, run.returncode, run.stderr[-600:]))
    sites = doc.get("sites", [])
    for site in sites:
        site["path"] = site["path"][2:] if site["path"].startswith("./") else site["path"]
    return sites


def registration_lines(site):
    """The (path, line) places a site's `registered_at` names."""
    places = []
    for word in (site.get("registered_at") or "").replace(",", " ").replace("(", " ").split():
        path, _, line = word.rpartition(":")
        if path.endswith(".py") and line.isdigit():
            places.append((path, int(line)))
    return places


def find(sites, label):
    by_name = [s for s in sites if s["path"] == label["path"] and s.get("qualname") == label["qualname"]]
    if len(by_name) > 1:
        by_name = [s for s in by_name if s["line"] == label["line"]] or by_name[:1]
    if by_name:
        return by_name[0]
    for s in sites:
        if s["path"] == label["path"] and s["line"] == label["line"] and s.get("status") != "unresolved":
            return s
    for path, line in registration_lines(label):
        for s in sites:
            if s.get("status") == "unresolved" and s["path"] == path and s["line"] == line:
                return s
    return None


def score(package, plain, every):
    """Counts and disagreement lines for one package."""
    counts = {"N": 0, "R": 0, "M": 0, "P": 0, "sites": 0}
    lines = []
    for label in package["sites"]:
        if label.get("test"):
            continue
        counts["sites"] += 1
        site = find(plain, label) or find(every, label)
        status = site["status"] if site else None
        if site and site not in plain and status not in ("unresolved",):
            status = "not-offload"  # seen only with --all-hooks
        where = "%s:%d %s" % (label["path"], label["line"], label["qualname"])
        said = (" -- hookfence: %s" % site.get("reason", "")) if site else ""
        if label["label"] == "offload":
            counts["N"] += 1
            if status in FOUND:
                counts["R"] += 1
            else:
                kind = {None: "MISSED (not listed)", "unresolved": "MISSED (unresolved)"}.get(status, "MISSED (not offload)")
                lines.append("%-22s %s%s; labelled offload: %s" % (kind, where, said, label["reason"]))
        if status in OFFLOAD:
            counts["M"] += 1
            if label["label"] in ("offload", "either"):
                counts["P"] += 1
            else:
                lines.append("%-22s %s%s; labelled not: %s" % ("FALSE OFFLOAD", where, said, label["reason"]))
    return counts, lines


def ratio(a, b):
    return a / b if b else 1.0


def floor_of(value):
    """`value` to 4 decimals, rounded down: a floor written from today's
    figure must hold today's figure (26/77 = 0.33766 rounds up to 0.3377)."""
    return math.floor(value * 10000 + 1e-9) / 10000


def evaluate(binary, packages, floor_path, hold_floor, update_floor, fetcher=None):
    """Scores `packages`, prints the report; the exit status."""
    fetcher = fetcher or fetch
    total = {"N": 0, "R": 0, "M": 0, "P": 0, "sites": 0}
    table = []
    for package in packages:
        root = fetcher(package)
        counts, lines = score(package, listed(binary, root, False), listed(binary, root, True))
        for line in lines:
            print("%s: %s" % (package["name"], line))
        for key in total:
            total[key] += counts[key]
        table.append((package["name"], package["version"], counts))
    print()
    print("| package | version | sites | offload found | offload verdicts right |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name, version, c in table:
        print("| %s | %s | %d | %d/%d | %d/%d |" % (name, version, c["sites"], c["R"], c["N"], c["P"], c["M"]))
    recall, precision = ratio(total["R"], total["N"]), ratio(total["P"], total["M"])
    print("| all | | %d | %d/%d | %d/%d |" % (total["sites"], total["R"], total["N"], total["P"], total["M"]))
    print()
    if update_floor:
        pathlib.Path(floor_path).write_text(json.dumps({"recall": floor_of(recall), "precision": floor_of(precision)}, indent=2) + "\n")
        print("labels: floor written: recall %.4f, precision %.4f" % (recall, precision))
    status = 0
    if hold_floor:
        floor = json.loads(pathlib.Path(floor_path).read_text())
        for what, value in (("recall", recall), ("precision", precision)):
            if value + 1e-9 < floor[what]:
                print("labels: %s %.4f is below the floor %.4f" % (what, value, floor[what]), file=sys.stderr)
                status = 1
    print("recall %d/%d (%.3f), precision %d/%d (%.3f)" % (total["R"], total["N"], recall, total["P"], total["M"], precision))
    return status


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hookfence")
    parser.add_argument("--package", action="append")
    parser.add_argument("--update-floor", action="store_true")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not args.hookfence:
        parser.error("--hookfence is required")
    packages = []
    for path in sorted(PACKAGES.glob("*.json")):
        package = json.loads(path.read_text())
        if not args.package or package["name"] in args.package:
            packages.append(package)
    if not packages:
        die("no package in %s" % PACKAGES)
    hold = not args.package and not args.update_floor
    return evaluate(os.path.abspath(args.hookfence), packages, FLOOR, hold, args.update_floor)


def self_test():
    """A stub that lists every labelled site as labelled must pass the floor;
    one that lists nothing must fail it. Both run through `evaluate`, as a
    real hookfence does."""
    packages = [json.loads(p.read_text()) for p in sorted(PACKAGES.glob("*.json"))]
    if not any(s["label"] == "offload" and not s.get("test") for p in packages for s in p["sites"]):
        die("self-test: no offload site is labelled")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        floor = tmp / "floor.json"
        floor.write_text(json.dumps({"recall": 1.0, "precision": 1.0}))
        outcomes = {}
        for name in ("perfect", "empty"):
            outcomes[name] = []
            for package in packages:
                sites = [] if name == "empty" else [
                    {"path": s["path"], "line": s["line"], "qualname": s["qualname"], "reason": "stub",
                     "status": "unfenced" if s["label"] == "offload" else "not-offload"}
                    for s in package["sites"]]
                doc = tmp / ("%s-%s.json" % (name, package["name"]))
                doc.write_text(json.dumps({"sites": sites}))
                stub = tmp / ("%s-%s" % (name, package["name"]))
                stub.write_text("#!/bin/sh\nexec cat '%s'\n" % doc)
                stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
                quiet = open(os.devnull, "w")
                saved = sys.stdout, sys.stderr
                sys.stdout = sys.stderr = quiet
                try:
                    status = evaluate(str(stub), [package], floor, True, False, fetcher=lambda _p: tmp)
                finally:
                    sys.stdout, sys.stderr = saved
                    quiet.close()
                outcomes[name].append(status)
        # A floor written from a figure holds that figure.
        for numerator in range(0, 78):
            if floor_of(numerator / 77) > numerator / 77:
                print("labels: self-test FAILED: the floor of %d/77 is above it" % numerator, file=sys.stderr)
                return 1
        if any(outcomes["perfect"]):
            print("labels: self-test FAILED: the perfect stub does not pass", file=sys.stderr)
            return 1
        if not any(outcomes["empty"]):
            print("labels: self-test FAILED: the empty stub passes", file=sys.stderr)
            return 1
    print("labels: self-test passed (a perfect stub passes, an empty one fails)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
