#!/usr/bin/env bash
# Soundness of the prefilter (issue 5): over the pinned corpus, the run that
# parses only the files that can matter (and queries only the parts of a tree
# that can match) must plan exactly what the run that parses every file and
# walks every tree whole plans: the same hook sites, statuses, reasons and
# edits, byte for byte, and the same diff, notes (`fullgraph=True` included)
# and summary. Checked for the default vocabulary and --all-hooks, and with
# 1 and 2 threads (output must not depend on the thread count).
#
# Usage: bash tests/prefilter/run.sh [CORPUS_TREE]
#   CORPUS_TREE defaults to the pinned corpus, made (or checked: a cached tree
#   that does not hash to the pinned manifest is rebuilt) by bench/corpus.py in
#   ${CORPUS_DIR:-$HOOKFENCE_CACHE/corpus}.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ $# -gt 0 ]; then
  tree=$1
else
  tree=$(python3 bench/corpus.py ${CORPUS_DIR:+"$CORPUS_DIR"}) || exit 2
fi
cargo build --release --quiet --bin hookfence
bin=$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/release/hookfence
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

passed=0 failed=0
check() { # name file-a file-b
  if python3 - "$2" "$3" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
keys = ("sites", "created")
ok = all(a[k] == b[k] for k in keys)
if not ok:
    sa = {(s["path"], s["line"], s["column"]): s for s in a["sites"]}
    sb = {(s["path"], s["line"], s["column"]): s for s in b["sites"]}
    for key in sorted(set(sa) ^ set(sb))[:20]:
        print("only in", "A" if key in sa else "B", key)
    for key in sorted(set(sa) & set(sb)):
        if sa[key] != sb[key]:
            print("differs", key, sa[key], sb[key])
print(f"{len(a['sites'])} sites, {sum(len(s['edits']) for s in a['sites'])} edits")
sys.exit(0 if ok else 1)
PY
  then echo "ok: $1"; passed=$((passed + 1))
  else echo "FAILED: $1"; failed=$((failed + 1))
  fi
}

for flags in "" "--all-hooks"; do
  name=${flags:-default}
  "$bin" -q --format json $flags "$tree" > "$out/pre-$name.json" || [ $? -eq 0 ]
  "$bin" -q --format json --no-prefilter $flags "$tree" > "$out/full-$name.json" || [ $? -eq 0 ]
  check "prefilter == full parse ($name)" "$out/pre-$name.json" "$out/full-$name.json"
done
"$bin" "$tree" > "$out/pre.diff" 2> "$out/pre.notes"
"$bin" --no-prefilter "$tree" > "$out/full.diff" 2> "$out/full.notes"
if cmp -s "$out/pre.diff" "$out/full.diff" && cmp -s "$out/pre.notes" "$out/full.notes"; then
  echo "ok: prefilter == full parse (diff, $(grep -c 'fullgraph=True' "$out/pre.notes") fullgraph notes, $(wc -l < "$out/pre.notes") note and summary lines)"
  passed=$((passed + 1))
else
  echo "FAILED: prefilter and full parse print different diffs or notes"
  diff "$out/pre.notes" "$out/full.notes" | head -20 || true
  failed=$((failed + 1))
fi
"$bin" -q -j 1 "$tree" > "$out/j1.diff"
"$bin" -q -j 2 "$tree" > "$out/j2.diff"
if cmp -s "$out/j1.diff" "$out/j2.diff"; then
  echo "ok: -j 1 and -j 2 print the same diff"; passed=$((passed + 1))
else
  echo "FAILED: -j 1 and -j 2 differ"; failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
