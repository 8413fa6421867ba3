#!/usr/bin/env bash
# Corpus tier: hookfence --all-hooks --apply over a pinned corpus of real
# Python (the .py files of 11 pure-Python wheels, ~9,000 files), every file
# checked against a pristine copy by tests/corpus/check.py. Minutes, not hours.
#
# Usage: bash tests/corpus/run.sh
# Env:   HOOKFENCE_CACHE   cache root (default ~/.cache/hookfence); the corpus
#                          lives in $HOOKFENCE_CACHE/corpus
#        CORPUS_DIR        corpus location (overrides the above)
#        KEEP_WORK=1       keep the temporary copies and print where they are
# Needs: cargo, python3 with pip (bench/corpus.py downloads the wheels pinned
# in bench/corpus.txt from PyPI once, and rebuilds the cached tree whenever it
# does not hash to the pinned manifest).
# First runs tests/corpus/test_cache.py (bench/corpus.py on a tiny local
# corpus) and tests/corpus/expected.py (the corpus's sites, verdicts and
# diffs against tests/corpus/expected/), then ends with `N passed, M failed` (one case per corpus file plus
# the whole-tree checks); exits 1 if any failed, 2 if there is no corpus.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
CACHE=${HOOKFENCE_CACHE:-$HOME/.cache/hookfence}
CORPUS_DIR=${CORPUS_DIR:-$CACHE/corpus}

echo "corpus: bench/corpus.py on a tiny local corpus (tests/corpus/test_cache.py)" >&2
python3 tests/corpus/test_cache.py
TREE=$(python3 bench/corpus.py "$CORPUS_DIR") || exit 2

echo "corpus: building hookfence (release)" >&2
cargo build --release --quiet --bin hookfence
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')

# Before/after: every site, verdict, reason and diff on the corpus is what
# tests/corpus/expected/ holds (an intended change updates it in its own
# commit: python3 tests/corpus/expected.py ... --update).
echo "corpus: outputs against tests/corpus/expected/ (tests/corpus/expected.py)" >&2
expected_status=0
python3 "$REPO/tests/corpus/expected.py" --hookfence "$TARGET_DIR/release/hookfence" \
  --tree "$TREE" || expected_status=1

WORK=$(mktemp -d "${TMPDIR:-/tmp}/hookfence-corpus.XXXXXX")
if [ "${KEEP_WORK:-0}" = 1 ]; then
  echo "corpus: keeping $WORK" >&2
else
  trap 'rm -rf "$WORK"' EXIT
fi
check_status=0
python3 "$REPO/tests/corpus/check.py" --bin "$TARGET_DIR/release/hookfence" \
  --corpus "$TREE" --work "$WORK" || check_status=$?
if [ "$expected_status" != 0 ]; then
  echo "corpus: outputs differ from tests/corpus/expected/ (see above)" >&2
  [ "$check_status" = 0 ] && check_status=1
fi
exit "$check_status"
