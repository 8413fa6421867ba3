#!/usr/bin/env bash
# The whole test suite, as README.md states it and .ci/run runs it.
#
# Tiers (each reports `N passed, M failed` and its own failures; all run even
# when one fails, and the script exits 1 if any failed):
#   - real torch: torch 2.15 + accelerate 1.12.0 under torch.compile
#     (tests/torch/run.sh; torch 2.15 and 2.6, ~5 GB of wheels cached in
#     ~/.cache/hookfence)
#   - packaging: the wheel, `pip install .`, pre-commit (tests/packaging/run.sh)
#   - corpus: --all-hooks --apply over ~9,000 real files, checked file by file
#     (tests/corpus/run.sh; the pinned corpus of bench/corpus.txt, made by
#     bench/corpus.py in ~/.cache/hookfence/corpus)
#   - prefilter: the prefilter plans exactly what a full parse plans
#     (tests/prefilter/run.sh, on the same corpus)
#   - clone: `git clone` of the committed HEAD into an empty directory and the
#     corpus tier there (tests/clone/run.sh): a clone needs nothing beside it
#   - labels: recall and precision on the hand-labelled hook sites of released
#     packages, held at a floor (tests/labels/run.sh; the packages are
#     downloaded once into ~/.cache/hookfence/labels)
#   - cargo test --all-targets: unit, fixture/snapshot, CLI, pty, property
#     (256 cases each, 48 for those that run git or CPython per case), fault
#     and real-world tests; run last so its summary closes the log.
set -uo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never} INSTA_UPDATE=${INSTA_UPDATE:-no}

failed=()
tier() {
  local name=$1 start=$SECONDS
  shift
  echo "=== tier: $name"
  if "$@"; then
    echo "=== tier: $name: ok ($((SECONDS - start)) s)"
  else
    echo "=== tier: $name: FAILED ($((SECONDS - start)) s)"
    failed+=("$name")
  fi
}

cargo build --release --quiet || exit 1
tier "real torch" bash tests/torch/run.sh
tier "packaging" bash tests/packaging/run.sh
tier "corpus" bash tests/corpus/run.sh
tier "prefilter" bash tests/prefilter/run.sh
tier "clone" bash tests/clone/run.sh
tier "labels" bash tests/labels/run.sh

echo "=== cargo test --all-targets"
log=$(mktemp)
cargo test --all-targets 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "${#failed[@]}" -gt 0 ]; then
  echo "failed tiers: ${failed[*]}" >&2
  status=1
fi
# cargo prints one result line per test binary, the last often for a target
# with no tests; close with the sum over all of them.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "%d passed, %d failed\n", p, f }' "$log"
rm -f "$log"
exit "$status"
