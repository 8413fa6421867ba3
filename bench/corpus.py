#!/usr/bin/env python3
"""The pinned corpus: the .py files of the wheels pinned in bench/corpus.txt.

  python3 bench/corpus.py [--pins FILE] [DEST]
      Makes DEST/tree hold exactly the pinned corpus and prints its path on
      stdout (progress and the figures go to stderr). DEST defaults to
      $HOOKFENCE_CACHE/corpus ($HOOKFENCE_CACHE defaults to ~/.cache/hookfence).
      A tree already there is used only if it hashes to the pinned manifest
      hash; anything else (missing, edited, a file added or lost, a symlink, a
      file that is not .py) is rebuilt from the wheels in DEST/dl, which pip
      downloads (hash-checked) only when one is missing or does not match its
      pin. The new tree is extracted beside the old one and swapped in once it
      hashes right. Exit 0, or 2 with the reason (the old tree left as it was).

  python3 bench/corpus.py --hash DEST
      Prints the manifest hash of DEST/tree as it is on disk, or the reason it
      has none (`missing`, `empty`, `not-a-corpus: ...`).

The pins file is a pip requirements file (`name==version
--hash=sha256:HEX` lines) with one `# manifest_sha256: HEX` comment.
Needs python3 with pip (for the download only).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PINS = os.path.join(HERE, "corpus.txt")


class CorpusError(Exception):
    """Why the corpus could not be made; printed as `corpus: ...`, exit 2."""


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    sha256: str
    line: int


@dataclass(frozen=True)
class Pins:
    path: str
    wheels: tuple[Pin, ...]
    manifest: str


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def read_pins(path: str) -> Pins:
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise CorpusError(f"{path}: cannot read the pins: {e.strerror}") from e
    wheels: list[Pin] = []
    manifest = None
    for number, line in enumerate(lines, 1):
        text = line.strip()
        m = re.fullmatch(r"#\s*manifest_sha256:\s*([0-9a-f]{64})", text)
        if m:
            if manifest is not None:
                raise CorpusError(f"{path}:{number}: a second manifest_sha256 line")
            manifest = m.group(1)
            continue
        if not text or text.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)\s+--hash=sha256:([0-9a-f]{64})", text)
        if not m:
            raise CorpusError(f"{path}:{number}: not `name==version --hash=sha256:HEX`: {text}")
        wheels.append(Pin(m.group(1), m.group(2), m.group(3), number))
    if manifest is None:
        raise CorpusError(f"{path}: no `# manifest_sha256: HEX` line")
    if not wheels:
        raise CorpusError(f"{path}: no pinned wheels")
    names = [normalize(p.name) for p in wheels]
    for pin in wheels:
        if names.count(normalize(pin.name)) > 1:
            raise CorpusError(f"{path}:{pin.line}: {pin.name} is pinned twice")
    return Pins(path, tuple(wheels), manifest)


# --------------------------------------------------------------------------
# the manifest hash


class Manifest:
    """sha256 over "<top>/<path>\\0" + sha256(bytes), in the order given."""

    def __init__(self) -> None:
        self.h = hashlib.sha256()
        self.files = 0
        self.bytes = 0

    def add(self, name: str, data: bytes) -> None:
        self.h.update(f"{name}\0".encode())
        self.h.update(hashlib.sha256(data).digest())
        self.files += 1
        self.bytes += len(data)

    def summary(self) -> str:
        return (
            f"files={self.files} bytes={self.bytes} MiB={self.bytes / 2**20:.1f} "
            f"manifest_sha256={self.h.hexdigest()}"
        )


def tree_manifest(tree: str) -> Manifest:
    """The manifest of a tree on disk. Raises CorpusError naming the first
    entry that cannot be in a corpus (a symlink, a file not ending in .py, a
    file at the top level, something that is neither file nor folder)."""
    if not os.path.isdir(tree) or os.path.islink(tree):
        raise CorpusError("missing")
    manifest = Manifest()
    for top in sorted(os.listdir(tree)):
        root = os.path.join(tree, top)
        if not stat.S_ISDIR(os.lstat(root).st_mode):
            raise CorpusError(f"not-a-corpus: {top} is not a folder")
        names = []
        for dirpath, dirs, filenames in os.walk(root):
            for d in dirs:
                if os.path.islink(os.path.join(dirpath, d)):
                    raise CorpusError(f"not-a-corpus: {os.path.relpath(os.path.join(dirpath, d), tree)} is a symlink")
            rel = os.path.relpath(dirpath, root)
            for name in filenames:
                path = os.path.join(dirpath, name)
                shown = os.path.relpath(path, tree)
                if not stat.S_ISREG(os.lstat(path).st_mode):
                    raise CorpusError(f"not-a-corpus: {shown} is not a regular file")
                if not name.endswith(".py"):
                    raise CorpusError(f"not-a-corpus: {shown} is not a .py file")
                names.append(name if rel == "." else f"{rel}/{name}".replace(os.sep, "/"))
        for name in sorted(names):
            with open(os.path.join(root, name), "rb") as f:
                manifest.add(f"{top}/{name}", f.read())
    if manifest.files == 0:
        raise CorpusError("empty")
    return manifest


def tree_hash(tree: str) -> str:
    try:
        return tree_manifest(tree).h.hexdigest()
    except CorpusError as e:
        return str(e)


# --------------------------------------------------------------------------
# the wheels


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def wheel_for(pin: Pin, dl: str) -> str | None:
    """The file in dl that is pin's wheel (by name and version), if any."""
    for name in sorted(os.listdir(dl)):
        parts = name[: -len(".whl")].split("-") if name.endswith(".whl") else []
        if len(parts) >= 5 and normalize(parts[0]) == normalize(pin.name) and parts[1] == pin.version:
            return os.path.join(dl, name)
    return None


def good_wheels(pins: Pins, dl: str) -> tuple[dict[Pin, str], list[Pin]]:
    """The pinned wheels in dl whose bytes match their pin, and the pins
    without one (a wheel with the wrong bytes is deleted)."""
    found: dict[Pin, str] = {}
    missing: list[Pin] = []
    for pin in pins.wheels:
        path = wheel_for(pin, dl)
        if path is not None and sha256_file(path) != pin.sha256:
            say(f"{path}: sha256 does not match {pins.path}:{pin.line}; deleting it")
            os.remove(path)
            path = None
        if path is None:
            missing.append(pin)
        else:
            found[pin] = path
    return found, missing


def download(pins: Pins, dl: str) -> None:
    argv = [
        sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
        "--only-binary=:all:", "--require-hashes", "--python-version", "3.11",
        "-r", pins.path, "-d", dl,
    ]
    say(f"downloading the pinned wheels into {dl}")
    try:
        code = subprocess.run(argv, stdout=sys.stderr).returncode
    except OSError as e:
        raise CorpusError(f"cannot run pip: {e}") from e
    if code != 0:
        raise CorpusError(f"pip download of the wheels pinned in {pins.path} failed (exit {code})")


def extract(pins: Pins, wheels: dict[Pin, str], tree: str) -> Manifest:
    """Writes the .py files of the wheels to tree/<dist>/<path> (wheels in
    file name order, entries in name order) and returns their manifest."""
    manifest = Manifest()
    for path in sorted(wheels.values()):
        top = os.path.basename(path).split("-")[0]
        try:
            with zipfile.ZipFile(path) as z:
                for info in sorted(z.infolist(), key=lambda i: i.filename):
                    name = info.filename
                    if not name.endswith(".py"):
                        continue
                    parts = name.split("/")
                    if name.startswith("/") or "\\" in name or any(p in ("", os.curdir, os.pardir) for p in parts):
                        raise CorpusError(f"{path}: refusing the entry {name!r} (not a plain relative path)")
                    data = z.read(info)
                    out = os.path.join(tree, top, *parts)
                    os.makedirs(os.path.dirname(out), exist_ok=True)
                    with open(out, "xb") as f:
                        f.write(data)
                    manifest.add(f"{top}/{name}", data)
        except (zipfile.BadZipFile, OSError) as e:
            raise CorpusError(f"{path}: cannot extract: {e}") from e
    return manifest


# --------------------------------------------------------------------------
# ensure


def say(msg: str) -> None:
    print(f"corpus: {msg}", file=sys.stderr, flush=True)


def ensure(pins: Pins, dest: str) -> str:
    tree = os.path.join(dest, "tree")
    dl = os.path.join(dest, "dl")
    os.makedirs(dl, exist_ok=True)
    with open(os.path.join(dest, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time per DEST
        have = tree_hash(tree)
        if have == pins.manifest:
            say(f"{tree} is up to date (manifest_sha256={have})")
            return tree
        say(f"{tree}: {have if len(have) != 64 else 'manifest_sha256=' + have}, "
            f"want {pins.manifest} ({pins.path}): rebuilding")
        wheels, missing = good_wheels(pins, dl)
        if missing:
            download(pins, dl)
            wheels, missing = good_wheels(pins, dl)
            if missing:
                raise CorpusError(
                    f"after pip download, no wheel matching {pins.path}:{missing[0].line} "
                    f"({missing[0].name}=={missing[0].version}) in {dl}"
                )
        new = tempfile.mkdtemp(prefix="tree.new.", dir=dest)
        try:
            built = extract(pins, wheels, new)
            got = built.h.hexdigest()
            if got != pins.manifest:
                raise CorpusError(
                    f"the pinned wheels give manifest_sha256={got}, but {pins.path} pins "
                    f"{pins.manifest}: fix the pin (the wheels themselves matched their hashes)"
                )
            on_disk = tree_hash(new)
            if on_disk != got:
                raise CorpusError(f"{new}: the extracted tree hashes to {on_disk}, not {got}")
            old = None
            if os.path.lexists(tree):
                old = tempfile.mkdtemp(prefix="tree.old.", dir=dest)
                os.rename(tree, os.path.join(old, "tree"))
            os.rename(new, tree)
            new = None
            if old is not None:
                shutil.rmtree(old)
        finally:
            if new is not None:
                shutil.rmtree(new, ignore_errors=True)
        say(f"built {tree}: {built.summary()}")
        return tree


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pins", default=DEFAULT_PINS, help="pins file (default: bench/corpus.txt)")
    ap.add_argument("--hash", action="store_true", help="only print DEST/tree's manifest hash")
    ap.add_argument("dest", nargs="?", help="corpus folder (default: $HOOKFENCE_CACHE/corpus)")
    args = ap.parse_args()
    dest = args.dest
    if dest is None:
        cache = os.environ.get("HOOKFENCE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "hookfence")
        dest = os.path.join(cache, "corpus")
    dest = os.path.abspath(os.path.expanduser(dest))
    if args.hash:
        print(tree_hash(os.path.join(dest, "tree")))
        return 0
    try:
        pins = read_pins(args.pins)
        print(ensure(pins, dest))
    except CorpusError as e:
        say(str(e))
        return 2
    except OSError as e:
        say(f"{e.filename or dest}: {e.strerror}")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
