#!/usr/bin/env python3
"""Remove the first fence line from FILE (negative controls).

Usage: unfence_one.py FILE [DECORATOR]

Deletes the first line that is only a fence decorator: ``@torch.compiler.disable()``
(any alias of torch) or ``@no_compile`` / ``@<module>.no_compile`` (the wrap
strategy), or ``@DECORATOR`` when given (a project's own fence, as
accelerate's ``_compiler_disable``), and prints the line removed. Exits 1 if
there is none.
"""

import re
import sys

FENCE = re.compile(r"^[ \t]*@[\w.]*(?:compiler\.disable\(\)|no_compile(?:\(\))?)[ \t]*\r?$")


def main():
    path = sys.argv[1]
    fence = FENCE
    if len(sys.argv) > 2:
        fence = re.compile(r"^[ \t]*@" + re.escape(sys.argv[2]) + r"(?:\(\))?[ \t]*\r?$")
    with open(path, "rb") as fh:
        lines = fh.read().decode("utf-8").split("\n")
    for i, line in enumerate(lines):
        if fence.match(line):
            del lines[i]
            with open(path, "wb") as fh:
                fh.write("\n".join(lines).encode("utf-8"))
            print(f"{path}:{i + 1}: removed {line.strip()}")
            return 0
    print(f"{path}: no fence line found", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
