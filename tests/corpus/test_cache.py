#!/usr/bin/env python3
"""bench/corpus.py on a tiny pinned corpus of two local wheels (no network:
pip gets no index, so any download attempt fails): a cached tree is used only
when it hashes to the pinned manifest, anything else is rebuilt, and a bad
pin or wheel is exit 2 with the old tree left as it was.

Usage: python3 tests/corpus/test_cache.py   (part of tests/corpus/run.sh)
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tempfile
import unittest
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "bench", "corpus.py")

WHEELS = {
    "alpha-1.0-py3-none-any.whl": {
        "alpha/__init__.py": b"import torch\n",
        "alpha/sub/mod.py": b"def f():\n    return 1\n",
        "alpha/data.txt": b"not python\n",
        "alpha-1.0.dist-info/METADATA": b"Name: alpha\n",
    },
    "beta_pkg-2.0-py3-none-any.whl": {
        "beta_pkg.py": b"x = 1\n",
        "beta_pkg/a.py": b"y = 2\n",
    },
}


def make_wheel(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def expected_manifest() -> str:
    """The definition in bench/corpus.txt, written out independently."""
    h = hashlib.sha256()
    for wheel in sorted(WHEELS):
        top = wheel.split("-")[0]
        for name in sorted(n for n in WHEELS[wheel] if n.endswith(".py")):
            h.update(f"{top}/{name}\0".encode())
            h.update(hashlib.sha256(WHEELS[wheel][name]).digest())
    return h.hexdigest()


class CorpusCache(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.dest = os.path.join(self.tmp.name, "corpus")
        self.tree = os.path.join(self.dest, "tree")
        self.wheels = {name: make_wheel(files) for name, files in WHEELS.items()}
        self.put_wheels()
        self.pins = os.path.join(self.tmp.name, "pins.txt")
        self.write_pins(expected_manifest())

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def put_wheels(self) -> None:
        os.makedirs(os.path.join(self.dest, "dl"), exist_ok=True)
        for name, data in self.wheels.items():
            with open(os.path.join(self.dest, "dl", name), "wb") as f:
                f.write(data)

    def write_pins(self, manifest: str) -> None:
        lines = ["# test pins", f"# manifest_sha256: {manifest}"]
        for name, data in self.wheels.items():
            dist, version = name.split("-")[:2]
            lines.append(f"{dist}=={version} --hash=sha256:{hashlib.sha256(data).hexdigest()}")
        with open(self.pins, "w") as f:
            f.write("\n".join(lines) + "\n")

    def corpus(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_FIND_LINKS="", PIP_CONFIG_FILE=os.devnull)
        return subprocess.run(
            [sys.executable, CORPUS, "--pins", self.pins, *args, self.dest],
            capture_output=True, text=True, env=env, timeout=300,
        )

    def ensure_ok(self) -> str:
        r = self.corpus()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), self.tree)
        self.assertEqual(self.corpus("--hash").stdout.strip(), expected_manifest())
        return r.stderr

    def read(self, rel: str) -> bytes:
        with open(os.path.join(self.tree, rel), "rb") as f:
            return f.read()

    def leftovers(self) -> list[str]:
        return sorted(n for n in os.listdir(self.dest) if n.startswith("tree."))

    def test_builds_only_the_py_files(self) -> None:
        err = self.ensure_ok()
        self.assertIn("missing", err)
        self.assertIn(f"manifest_sha256={expected_manifest()}", err)
        found = sorted(
            os.path.relpath(os.path.join(d, n), self.tree) for d, _, ns in os.walk(self.tree) for n in ns
        )
        self.assertEqual(found, ["alpha/alpha/__init__.py", "alpha/alpha/sub/mod.py",
                                 "beta_pkg/beta_pkg.py", "beta_pkg/beta_pkg/a.py"])
        self.assertEqual(self.read("alpha/alpha/sub/mod.py"), WHEELS["alpha-1.0-py3-none-any.whl"]["alpha/sub/mod.py"])
        self.assertEqual(self.leftovers(), [])

    def test_a_matching_tree_is_used_as_it_is(self) -> None:
        self.ensure_ok()
        ino = os.stat(os.path.join(self.tree, "alpha/alpha/__init__.py")).st_ino
        err = self.ensure_ok()
        self.assertIn("up to date", err)
        self.assertEqual(os.stat(os.path.join(self.tree, "alpha/alpha/__init__.py")).st_ino, ino)

    def test_a_tree_that_does_not_match_is_rebuilt(self) -> None:
        def add(rel: str, data: bytes = b"", mode: str = "wb") -> None:
            os.makedirs(os.path.dirname(os.path.join(self.tree, rel)), exist_ok=True)
            with open(os.path.join(self.tree, rel), mode) as f:
                f.write(data)

        def rename(a: str, b: str) -> None:
            os.rename(os.path.join(self.tree, a), os.path.join(self.tree, b))

        damage = {
            "an edited file": lambda: add("alpha/alpha/__init__.py", b"# edited\n", "ab"),
            "a lost file": lambda: os.remove(os.path.join(self.tree, "beta_pkg/beta_pkg.py")),
            "an added .py file": lambda: add("alpha/alpha/extra.py"),
            "an added .pyi file": lambda: add("alpha/alpha/stub.pyi"),
            "a stray top-level folder": lambda: add("gamma/x/y.py"),
            "a symlink": lambda: os.symlink("/etc/hostname", os.path.join(self.tree, "alpha/alpha/link.py")),
            "a file swapped for another": lambda: rename("beta_pkg/beta_pkg/a.py", "beta_pkg/beta_pkg/b.py"),
        }
        for what, hurt in damage.items():
            with self.subTest(what):
                self.ensure_ok()
                hurt()
                self.assertNotEqual(self.corpus("--hash").stdout.strip(), expected_manifest())
                err = self.ensure_ok()
                self.assertIn("rebuilding", err)
                self.assertEqual(self.leftovers(), [])

    def test_a_wheel_with_wrong_bytes_is_not_used(self) -> None:
        self.ensure_ok()
        with open(os.path.join(self.dest, "dl", "alpha-1.0-py3-none-any.whl"), "ab") as f:
            f.write(b"tampered")
        with open(os.path.join(self.tree, "alpha/alpha/__init__.py"), "ab") as f:
            f.write(b"# edited\n")
        r = self.corpus()
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("sha256 does not match", r.stderr)
        self.assertIn("pip download", r.stderr)
        # Nothing half-built is left, and the old tree is as it was.
        self.assertEqual(self.leftovers(), [])
        self.assertTrue(self.read("alpha/alpha/__init__.py").endswith(b"# edited\n"))
        self.put_wheels()
        self.ensure_ok()

    def test_a_wrong_manifest_pin_is_exit_2_naming_both_hashes(self) -> None:
        self.write_pins("0" * 64)
        r = self.corpus()
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(f"give manifest_sha256={expected_manifest()}", r.stderr)
        self.assertIn(f"{self.pins} pins {'0' * 64}", r.stderr)
        self.assertFalse(os.path.exists(self.tree))
        self.assertEqual(self.leftovers(), [])

    def test_an_entry_escaping_the_tree_is_refused(self) -> None:
        evil = f"{os.pardir}/evil.py"  # an entry that would land beside the tree
        self.wheels["alpha-1.0-py3-none-any.whl"] = make_wheel({evil: b"x = 1\n"})
        self.put_wheels()
        self.write_pins(expected_manifest())
        r = self.corpus()
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(f"refusing the entry {evil!r}", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dest, "evil.py")))
        self.assertFalse(os.path.exists(os.path.join(self.tree)))
        self.assertEqual(self.leftovers(), [])

    def test_a_bad_pins_line_names_the_file_and_line(self) -> None:
        with open(self.pins, "a") as f:
            f.write("gamma>=1\n")
        r = self.corpus()
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(f"{self.pins}:5: not `name==version --hash=sha256:HEX`", r.stderr)

    def test_the_default_place_is_the_hookfence_cache(self) -> None:
        env = dict(os.environ, HOOKFENCE_CACHE=os.path.join(self.tmp.name, "cache"))
        r = subprocess.run([sys.executable, CORPUS, "--hash"], capture_output=True, text=True, env=env)
        self.assertEqual(r.stdout.strip(), "missing")
        os.makedirs(os.path.join(self.tmp.name, "cache"))
        os.rename(self.dest, os.path.join(self.tmp.name, "cache", "corpus"))
        r = subprocess.run([sys.executable, CORPUS, "--pins", self.pins], capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), os.path.join(self.tmp.name, "cache", "corpus", "tree"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
