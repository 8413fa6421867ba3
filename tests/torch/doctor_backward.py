#!/usr/bin/env python3
"""Negative controls for verdict_backward.py: writes a copy of a
compile_backward.py summary with one figure the decision rests on changed.

Usage: doctor_backward.py IN.json OUT.json fenced|free-fence

- fenced: the file carries a fence on one backward hook (as if hookfence had
  fenced it);
- free-fence: with compiled autograd, the fenced hooks cost no more graph
  breaks than the hooks as written.

verdict_backward.py must fail (exit 1) on either.
"""

import json
import sys


def main():
    src, dst, kind = sys.argv[1:4]
    with open(src) as fh:
        s = json.load(fh)
    if kind == "fenced":
        s["fenced_in_file"]["offload_after_backward"] = True
    elif kind == "free-fence":
        runs = s["runs"]
        runs["copy/fenced/compile_ca"]["graph_breaks"] = runs["copy/as_written/compile_ca"]["graph_breaks"]
    else:
        sys.exit(f"unknown kind {kind!r}")
    with open(dst, "w") as fh:
        json.dump(s, fh)


if __name__ == "__main__":
    main()
