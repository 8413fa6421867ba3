#!/usr/bin/env bash
# Corpus tier: hookfence --all-hooks --apply over a pinned corpus of real
# Python (the .py files of 11 pure-Python wheels, ~9,000 files), every file
# checked against a pristine copy by tests/corpus/check.py. Minutes, not hours.
#
# Usage: bash tests/corpus/run.sh
# Env:   HOOKFENCE_SHARED  the shared/ directory holding bench/make-corpus.sh
#                          (default: ../shared beside the repository root)
#        HOOKFENCE_CACHE   cache root (default ~/.cache/hookfence); the corpus
#                          is built in $HOOKFENCE_CACHE/corpus
#        CORPUS_DIR        corpus location (overrides the above)
#        KEEP_WORK=1       keep the temporary copies and print where they are
# Needs: cargo, python3 with pip (make-corpus.sh downloads hash-pinned wheels
# from PyPI once).
# Ends with `N passed, M failed` (one case per corpus file plus the whole-tree
# checks); exits 1 if any failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD

SHARED=${HOOKFENCE_SHARED:-}
if [ -z "$SHARED" ]; then
  top=$(git rev-parse --show-toplevel 2>/dev/null || echo "$REPO")
  for candidate in "$top/../shared" "$REPO/../shared"; do
    if [ -f "$candidate/bench/make-corpus.sh" ]; then SHARED=$candidate; break; fi
  done
fi
if [ -z "$SHARED" ] || [ ! -f "$SHARED/bench/make-corpus.sh" ]; then
  echo "corpus: no shared/bench/make-corpus.sh (set HOOKFENCE_SHARED)" >&2
  exit 2
fi
CACHE=${HOOKFENCE_CACHE:-$HOME/.cache/hookfence}
CORPUS_DIR=${CORPUS_DIR:-$CACHE/corpus}

echo "corpus: building $CORPUS_DIR with $SHARED/bench/make-corpus.sh" >&2
bash "$SHARED/bench/make-corpus.sh" "$CORPUS_DIR"

echo "corpus: building hookfence (release)" >&2
cargo build --release --quiet --bin hookfence
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')

WORK=$(mktemp -d "${TMPDIR:-/tmp}/hookfence-corpus.XXXXXX")
if [ "${KEEP_WORK:-0}" = 1 ]; then
  echo "corpus: keeping $WORK" >&2
else
  trap 'rm -rf "$WORK"' EXIT
fi
python3 "$REPO/tests/corpus/check.py" --bin "$TARGET_DIR/release/hookfence" \
  --corpus "$CORPUS_DIR/tree" --work "$WORK"
