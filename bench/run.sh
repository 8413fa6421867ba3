#!/usr/bin/env bash
# hookfence benchmark: builds hookfence and the parse-only example in release,
# ensures the pinned corpus (bench/corpus.py, pins in bench/corpus.txt) and a
# pinned ast-grep, then times (in one run, alternating, BENCH_RUNS runs each,
# medians):
#   walk+read (find+cat), hookfence dry run, --check, --list (if present),
#   a tree-sitter parse-only pass (examples/parse_only.rs),
#   hookfence --no-prefilter -j 1 / -j 2, ast-grep with bench/ast-grep/, a
#   partial run (one file of the largest project, the project for context,
#   as pre-commit runs it) and a dry run over 8 copies of the corpus;
#   then hostile shapes of one file at n and 2n (bench/hostile.py).
# Prints a Markdown report (machine, table, ratios, targets) and writes it to
# bench/LATEST.md.
#
# Usage: bash bench/run.sh            (BENCH_RUNS=5 by default)
# Env:   BENCH_RUNS      timed runs per command
#        HOOKFENCE_CACHE cache root (default ~/.cache/hookfence)
#        CORPUS_DIR      corpus location (default $HOOKFENCE_CACHE/corpus)
#        BENCH_OUT       report file (default bench/LATEST.md)
# Needs: cargo, python3 with venv + pip, /usr/bin/time (GNU time; installed
# with apt-get if missing).
set -euo pipefail

cd "$(dirname "$0")/.."
REPO=$PWD
BENCH_RUNS=${BENCH_RUNS:-5}
CACHE=${HOOKFENCE_CACHE:-$HOME/.cache/hookfence}
CORPUS_DIR=${CORPUS_DIR:-$CACHE/corpus}
BENCH_OUT=${BENCH_OUT:-$REPO/bench/LATEST.md}
AST_GREP_VERSION=0.51.1
VENV=$CACHE/bench-venv

say() { echo "bench: $*" >&2; }

# 1. Builds (release; the same profile users get from `cargo install`).
say "building hookfence and examples/parse_only.rs (release)"
cargo build --release --quiet --bin hookfence
cargo build --release --quiet --example parse_only
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
HOOKFENCE=$TARGET_DIR/release/hookfence
PARSE_ONLY=$TARGET_DIR/release/examples/parse_only
REV=$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown)

# 2. The pinned corpus (bench/corpus.txt): a cached tree that does not hash
#    to the pinned manifest (missing, edited, files added or lost) is rebuilt.
TREE=$(python3 bench/corpus.py "$CORPUS_DIR") || exit 2
CORPUS_SHA256=$(python3 bench/corpus.py --hash "$CORPUS_DIR")

# 2b. Eight copies of the corpus, for the linear-cost row: rebuilt when the
#     corpus's manifest hash changes.
COPIES=$CACHE/corpus-x8
if [[ $(cat "$COPIES/.manifest" 2>/dev/null) != "$CORPUS_SHA256" ]]; then
  say "copying the corpus 8 times into $COPIES"
  rm -rf "$COPIES"
  mkdir -p "$COPIES"
  for i in 1 2 3 4 5 6 7 8; do cp -r "$TREE" "$COPIES/copy$i"; done
  echo "$CORPUS_SHA256" > "$COPIES/.manifest"
fi

# 3. A pinned ast-grep in its own venv.
if [[ ! -x $VENV/bin/ast-grep ]] ||
  [[ $("$VENV/bin/ast-grep" --version 2>/dev/null) != "ast-grep $AST_GREP_VERSION" ]]; then
  say "installing ast-grep-cli==$AST_GREP_VERSION into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "ast-grep-cli==$AST_GREP_VERSION"
fi

# 4. GNU time for peak RSS.
if [[ ! -x /usr/bin/time ]]; then
  say "installing GNU time"
  (apt-get update -qq && apt-get install -y -qq time) >&2
fi

# 5. Measure.
python3 bench/driver.py run \
  --tree "$TREE" \
  --hookfence "$HOOKFENCE" \
  --hookfence-rev "$REV" \
  --parse-only "$PARSE_ONLY" \
  --ast-grep "$VENV/bin/ast-grep" \
  --sgconfig "$REPO/bench/ast-grep/sgconfig.yml" \
  --runs "$BENCH_RUNS" \
  --manifest "manifest_sha256=$CORPUS_SHA256" \
  --copies "$COPIES" \
  --out "$BENCH_OUT"

# 6. Cost in one file's size: hostile shapes at n and 2n, appended.
python3 bench/hostile.py --hookfence "$HOOKFENCE" --out "$BENCH_OUT" >/dev/null
