#!/usr/bin/env bash
# Labels tier: hookfence's recall and precision on the hand-labelled hook sites
# of released packages (tests/labels/packages/*.json), held at the floor in
# tests/labels/floor.json. The packages are downloaded once (pip, pinned by
# sha256) into $HOOKFENCE_CACHE/labels (default ~/.cache/hookfence/labels).
# First checks the scorer itself (a perfect stub passes, an empty one fails).
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --quiet --bin hookfence
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
python3 tests/labels/score.py --self-test
python3 tests/labels/score.py --hookfence "$TARGET_DIR/release/hookfence"
