#!/usr/bin/env bash
# Clone tier: the README's test command as a new user runs it. `git clone` of
# this checkout's committed HEAD into a fresh directory with nothing beside
# it, then the corpus tier (tests/corpus/run.sh) there, with the same
# $HOOKFENCE_CACHE: a script that reaches for a file beside the checkout
# (a shared/ folder next to it, say) or for anything not committed fails
# here. The cached corpus is reused when it hashes to the pinned manifest.
#
# Usage: bash tests/clone/run.sh
# Env:   HOOKFENCE_CACHE  cache root (default ~/.cache/hookfence). The clone
#                         builds into $HOOKFENCE_CACHE/clone-target, kept
#                         between runs so that only hookfence recompiles (the
#                         checkout's own target/ is left alone).
# Uncommitted changes are not in the clone: this checks what is committed.
# Ends with the corpus tier's `N passed, M failed`; exits as it does.
set -euo pipefail
cd "$(dirname "$0")/../.."
CACHE=${HOOKFENCE_CACHE:-$HOME/.cache/hookfence}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)

HEAD=$(git rev-parse HEAD)
if [ -n "$(git status --porcelain --untracked-files=normal)" ]; then
  echo "clone: the working tree has uncommitted changes; the clone has only $HEAD" >&2
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hookfence-clone.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
git clone --quiet --no-checkout "$PWD" "$WORK/hookfence"
# A detached HEAD is on no branch the clone fetched: fetch it by id.
git -C "$WORK/hookfence" cat-file -e "$HEAD^{commit}" 2>/dev/null ||
  git -C "$WORK/hookfence" fetch --quiet origin "$HEAD"
git -C "$WORK/hookfence" checkout --quiet --detach "$HEAD"
beside=$(ls -A "$WORK")
if [ "$beside" != hookfence ]; then
  echo "clone: expected the clone alone in $WORK, found: $beside" >&2
  exit 2
fi
echo "clone: $HEAD cloned into $WORK/hookfence; running tests/corpus/run.sh there" >&2
cd "$WORK/hookfence"
HOOKFENCE_CACHE=$CACHE CARGO_TARGET_DIR=$CACHE/clone-target bash tests/corpus/run.sh
