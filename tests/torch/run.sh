#!/usr/bin/env bash
# Real-torch proof tier: hookfence's rewrite of accelerate 1.12.0, checked with
# torch 2.15.0 and torch.compile (inductor) on CPU.
#
#   tests/torch/run.sh   (from anywhere; 2-4 min with a cached venv, plus
#                         ~2 min to build the venv the first time)
#   HOOKFENCE=/path/to/hookfence tests/torch/run.sh   (skips cargo build)
#
# 1. setup-venv.sh: the torch venv, cached in ${HOOKFENCE_CACHE:-~/.cache/hookfence}.
# 2. cargo build --release; the accelerate 1.12.0 wheel, hash-pinned, cached
#    in $CACHE/wheels; unpacked into a temp dir as one tree per variant:
#      prefix/    pristine
#      decorate/  hookfence --apply                 (default strategy)
#      wrap/      hookfence --apply --strategy wrap (when --help lists --strategy)
#    current/   accelerate 1.15.0, whose hooks upstream fenced with its own
#               lazy wrapper (`_compiler_disable`): --check and the emitted
#               guard both pass, and both fail with one of its fences removed
#    Each tree also gets tests/torch/plain_hook.py as hookfence_plain_hook.py,
#    so hookfence fences a plain register_forward_pre_hook hook too, and
#    tests/torch/block_swap.py as hookfence_block_swap.py, whose two backward
#    hooks hookfence must list and leave unfenced. When
#    --help lists --emit-pytest, each --apply also writes
#    <tree>/test_hookfence_fences.py.
# 3. Checks, run with the venv's python and PYTHONPATH=<tree>:
#    check_markers.py (the 7 hooks carry dynamo's disable marker, ModelHook's
#    don't; none does in prefix/), check_no_compile.py (wrap: the helpers'
#    registered_hooks() / assert_all_disabled()), the emitted pytest,
#    compile_offload.py per tree judged by verdict.py, and negative controls:
#    with one fence line removed from hooks.py, the marker check and the
#    emitted pytest must fail (exit 1). The guard a dry run writes on prefix/
#    fails there, as --check does; regenerated with --check on a rewritten
#    tree, it is byte for byte the one --apply wrote.
#    The lazy-fence experiment: lazy_fence.py on the wrap helper of a small
#    package of its own (import cost, graph breaks, graphs and fullgraph=True
#    against the eager fence), with torch 2.15.0 and with torch 2.6.0 (a
#    second venv, `setup-venv.sh 2.6`); verdict.py also checks that the wrap tree's `import
#    accelerate.hooks` does not pull in torch._dynamo and costs no more
#    breaks or graphs than the decorate tree in any case.
#    The backward-hook experiment: compile_backward.py on the decorate tree's
#    hookfence_block_swap.py (hooks as hookfence left them, and fenced),
#    trained with torch.compile with and without compiled autograd, judged by
#    verdict_backward.py; as negative controls, the verdict must fail on the
#    summary doctored by doctor_backward.py (a hook fenced in the file, a
#    fence that costs no graph break).
#    applied_backward.py: a hook hands a helper an autograd Function and a
#    closure the Function calls at backward time; --check fails on it,
#    --apply fences the hook and the closure, and the fenced file compiles
#    to eager's gradients with the closure marked (the pristine file's is
#    not: a negative control).
# Prints PASS/FAIL per check and, last, "N passed, M failed"; exits 1 on any
# failure. The figures go to stdout and to $CACHE/torch-tier/ (JSON + table).
# HOOKFENCE_KEEP=1 keeps the temp dir.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${HOOKFENCE_CACHE:-$HOME/.cache/hookfence}"
ACCELERATE_WHEEL="accelerate-1.12.0-py3-none-any.whl"
ACCELERATE_SHA256="3e2091cd341423207e2f084a6654b1efcd250dc326f2a37d6dde446e07cabb11"
# The current release, whose hooks upstream fenced with its own lazy wrapper
# (`_compiler_disable`, PR #3947).
CURRENT_WHEEL="accelerate-1.15.0-py3-none-any.whl"
CURRENT_SHA256="97eacca0b73e45cb867dbf8c5d5d4dc32219544300e0c8992c7334dc2ef33cec"

# Tiny models on 2 cores: a second OpenMP thread makes every small CPU matmul
# take ~24 ms here (thread wake-up), which drowns the timings; one thread
# makes them microseconds. Inductor compiles in-process (no worker pool).
export OMP_NUM_THREADS=1 TORCHINDUCTOR_COMPILE_THREADS=1

PY="$("$HERE/setup-venv.sh")"
if [[ -z "${HOOKFENCE:-}" ]]; then # HOOKFENCE=/path/to/binary skips the build
  (cd "$ROOT" && cargo build --release --quiet)
  HOOKFENCE="$ROOT/target/release/hookfence"
fi
HELP="$("$HOOKFENCE" --help)"

mkdir -p "$CACHE/wheels"
# fetch_wheel NAME==VERSION FILE SHA256: the wheel, hash-pinned, cached.
fetch_wheel() {
  local spec="$1" file="$2" sha="$3" reqs
  if [[ ! -f "$CACHE/wheels/$file" ]]; then
    reqs="$(mktemp)"
    echo "$spec --hash=sha256:$sha" >"$reqs"
    "$PY" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
      --require-hashes -r "$reqs" -d "$CACHE/wheels"
    rm -f "$reqs"
  fi
  echo "$sha  $CACHE/wheels/$file" | sha256sum --check --quiet
}
fetch_wheel accelerate==1.12.0 "$ACCELERATE_WHEEL" "$ACCELERATE_SHA256"
fetch_wheel accelerate==1.15.0 "$CURRENT_WHEEL" "$CURRENT_SHA256"
wheel="$CACHE/wheels/$ACCELERATE_WHEEL"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/hookfence-torch.XXXXXX")"
if [[ "${HOOKFENCE_KEEP:-}" == 1 ]]; then
  echo "run.sh: keeping $WORK"
else
  trap 'rm -rf "$WORK"' EXIT
fi
CHECKS="$WORK/checks.txt"
mkdir -p "$WORK/logs"
: >"$CHECKS"

pass() { echo "PASS $1" | tee -a "$CHECKS"; }
fail() {
  echo "FAIL $1" | tee -a "$CHECKS"
  [[ -f "$WORK/logs/$2.log" ]] && sed 's/^/    /' "$WORK/logs/$2.log" | tail -25
  return 0
}
# check NAME CMD...: passes when CMD exits 0.
check() {
  local name="$1" log="${1//[^A-Za-z0-9_.-]/_}"
  shift
  if "$@" >"$WORK/logs/$log.log" 2>&1; then pass "$name"; else fail "$name (exit $?)" "$log"; fi
}
# check_fails NAME CMD...: passes when CMD exits exactly 1 (a failed check or
# failed tests, not a crash, usage error or "no tests collected").
check_fails() {
  local name="$1" log="${1//[^A-Za-z0-9_.-]/_}" rc=0
  shift
  "$@" >"$WORK/logs/$log.log" 2>&1 || rc=$?
  if [[ $rc == 1 ]]; then pass "$name"; else fail "$name (exit $rc, want 1)" "$log"; fi
}
in_tree() { # in_tree TREE CMD...: run CMD with PYTHONPATH=TREE
  local tree="$1"
  shift
  PYTHONPATH="$tree" "$@"
}

make_tree() {
  mkdir -p "$WORK/$1"
  "$PY" -m zipfile -e "$wheel" "$WORK/$1"
  cp "$HERE/plain_hook.py" "$WORK/$1/hookfence_plain_hook.py"
  cp "$HERE/block_swap.py" "$WORK/$1/hookfence_block_swap.py"
}

# ---- trees ----------------------------------------------------------------
make_tree prefix
STRATEGIES=(decorate)
declare -A APPLY=([decorate]="")
if grep -q -- --strategy <<<"$HELP"; then
  STRATEGIES+=(wrap)
  APPLY[wrap]=" --strategy wrap"
fi
EMIT_PYTEST=0
if grep -q -- --emit-pytest <<<"$HELP"; then EMIT_PYTEST=1; fi

for s in "${STRATEGIES[@]}"; do
  make_tree "$s"
  emit=()
  [[ $EMIT_PYTEST == 1 ]] && emit=(--emit-pytest "$WORK/$s/test_hookfence_fences.py")
  # shellcheck disable=SC2086 # APPLY holds whole option words
  check "$s: hookfence --apply${APPLY[$s]}" \
    "$HOOKFENCE" --apply ${APPLY[$s]} "${emit[@]}" "$WORK/$s/accelerate" "$WORK/$s/hookfence_plain_hook.py" \
    "$WORK/$s/hookfence_block_swap.py"
  # shellcheck disable=SC2086
  check "$s: hookfence --check${APPLY[$s]} after --apply" \
    "$HOOKFENCE" --check ${APPLY[$s]} "$WORK/$s/accelerate" "$WORK/$s/hookfence_plain_hook.py" \
    "$WORK/$s/hookfence_block_swap.py"
  check "$s: --apply leaves the backward hooks' file as it was" \
    cmp "$HERE/block_swap.py" "$WORK/$s/hookfence_block_swap.py"
  check "$s: --list names both backward hooks as backward" \
    bash -c '[[ "$("$1" --list "$2" | grep -c "  backward  ")" == 2 ]]' _ "$HOOKFENCE" "$WORK/$s/hookfence_block_swap.py"
done

# ---- markers, helper module, emitted pytest -------------------------------
check "prefix: no hook carries the marker" \
  in_tree "$WORK/prefix" "$PY" "$HERE/check_markers.py" "$WORK/prefix" --expect unfenced
if [[ $EMIT_PYTEST == 1 ]]; then
  # The guard a dry run writes on the pristine tree fails, as --check does.
  check "prefix: hookfence --emit-pytest (dry run)" \
    "$HOOKFENCE" -q --emit-pytest "$WORK/prefix/test_hookfence_fences.py" "$WORK/prefix/accelerate"
  check_fails "prefix: --check fails before --apply" "$HOOKFENCE" -q --check "$WORK/prefix/accelerate"
  check_fails "prefix: the emitted guard fails before --apply" \
    in_tree "$WORK/prefix" "$PY" -m pytest -q -p no:cacheprovider --rootdir "$WORK/prefix" "$WORK/prefix/test_hookfence_fences.py"
fi
for s in "${STRATEGIES[@]}"; do
  check "$s: the 7 offload hooks carry the marker, ModelHook's don't" \
    in_tree "$WORK/$s" "$PY" "$HERE/check_markers.py" "$WORK/$s"
  if [[ $s == wrap ]]; then
    check "wrap: registered_hooks() and assert_all_disabled()" \
      in_tree "$WORK/wrap" "$PY" "$HERE/check_no_compile.py" "$WORK/wrap"
  fi
  if [[ $EMIT_PYTEST == 1 ]]; then
    check "$s: emitted pytest passes" \
      in_tree "$WORK/$s" "$PY" -m pytest -q -p no:cacheprovider --rootdir "$WORK/$s" "$WORK/$s/test_hookfence_fences.py"
    # Regenerated later on the rewritten tree, the guard is the same file.
    check "$s: --check --emit-pytest on the rewritten tree" \
      "$HOOKFENCE" -q --check --emit-pytest "$WORK/$s/test_again.py" "$WORK/$s/accelerate" \
      "$WORK/$s/hookfence_plain_hook.py" "$WORK/$s/hookfence_block_swap.py"
    check "$s: the regenerated guard is the one --apply wrote" \
      cmp "$WORK/$s/test_hookfence_fences.py" "$WORK/$s/test_again.py"
    rm -f "$WORK/$s/test_again.py"
  fi
done

# ---- the current release: upstream's own lazy fences ----------------------
# --check and the guard agree: both pass as upstream ships it, both fail with
# one of its `@_compiler_disable` lines removed.
mkdir -p "$WORK/current"
"$PY" -m zipfile -e "$CACHE/wheels/$CURRENT_WHEEL" "$WORK/current"
check "current: hookfence --check passes on upstream's lazy fences" \
  "$HOOKFENCE" -q --check "$WORK/current/accelerate"
if [[ $EMIT_PYTEST == 1 ]]; then
  check "current: hookfence --emit-pytest" \
    "$HOOKFENCE" -q --emit-pytest "$WORK/current/test_hookfence_fences.py" "$WORK/current/accelerate"
  check "current: the emitted guard passes" \
    in_tree "$WORK/current" "$PY" -m pytest -q -p no:cacheprovider --rootdir "$WORK/current" "$WORK/current/test_hookfence_fences.py"
fi
check "current: remove one lazy fence from hooks.py" \
  "$PY" "$HERE/unfence_one.py" "$WORK/current/accelerate/hooks.py" _compiler_disable
check_fails "current: --check fails with one lazy fence removed" \
  "$HOOKFENCE" -q --check "$WORK/current/accelerate"
if [[ $EMIT_PYTEST == 1 ]]; then
  check_fails "current: the emitted guard fails with one lazy fence removed" \
    in_tree "$WORK/current" "$PY" -m pytest -q -p no:cacheprovider --rootdir "$WORK/current" "$WORK/current/test_hookfence_fences.py"
fi

# ---- compile experiment ---------------------------------------------------
mkdir -p "$CACHE/torch-tier"
for t in prefix "${STRATEGIES[@]}"; do
  cases=()
  # the script's own hand-fenced / unfenced plain hook pair runs once
  [[ $t != prefix ]] && cases=(--cases "cpu_offload,cpu_offload_hook,layerwise_casting,plain_tree")
  echo "run.sh: compile experiment on $t/ ..."
  if ! TORCHINDUCTOR_CACHE_DIR="$WORK/inductor-$t" in_tree "$WORK/$t" \
    "$PY" "$HERE/compile_offload.py" "$WORK/$t" "${cases[@]}" --json "$WORK/$t.json" \
    >"$WORK/logs/compile-$t.log" 2>"$WORK/logs/compile-$t.err"; then
    fail "$t: compile_offload.py ran" "compile-$t"
    tail -25 "$WORK/logs/compile-$t.err"
  else
    grep '^# ' "$WORK/logs/compile-$t.err" || true
    cp "$WORK/$t.json" "$CACHE/torch-tier/$t.json"
  fi
done
fenced=()
for s in "${STRATEGIES[@]}"; do
  [[ -f "$WORK/$s.json" ]] && fenced+=(--fenced "$s=$WORK/$s.json")
done
if [[ -f "$WORK/prefix.json" ]]; then
  "$PY" "$HERE/verdict.py" --prefix "$WORK/prefix.json" "${fenced[@]}" \
    --lazy wrap --eager decorate --checks "$CHECKS" --table "$CACHE/torch-tier/results.md" || true
else
  fail "prefix: compile experiment produced a summary" "compile-prefix"
fi

# ---- the lazy fence: the wrap helper against torch's eager disable --------
# On a package of its own (tests/torch/plain_hook.py, rewritten with the wrap
# strategy), so that it needs nothing but torch: with this tier's torch and
# with torch 2.6.0 (setup-venv.sh 2.6, its own venv).
if [[ " ${STRATEGIES[*]} " == *" wrap "* ]]; then
  mkdir -p "$WORK/lazy/lazypkg"
  : >"$WORK/lazy/lazypkg/__init__.py"
  cp "$HERE/plain_hook.py" "$WORK/lazy/lazypkg/plain_hook.py"
  check "lazy: hookfence --apply --strategy wrap" \
    "$HOOKFENCE" -q --apply --strategy wrap "$WORK/lazy/lazypkg"
  PY26="$("$HERE/setup-venv.sh" 2.6)"
  for series in 2.15 2.6; do
    py="$PY"
    [[ $series == 2.6 ]] && py="$PY26"
    echo "run.sh: lazy-fence experiment with torch $series ..."
    "$py" "$HERE/lazy_fence.py" "$WORK/lazy" lazypkg._no_compile \
      --json "$CACHE/torch-tier/lazy_fence-$series.json" \
      >"$WORK/logs/lazy-fence-$series.log" 2>"$WORK/logs/lazy-fence-$series.err" || true
    if grep -q '^PASS lazy fence: ' "$WORK/logs/lazy-fence-$series.log"; then
      grep -E '^(PASS|FAIL) lazy fence: ' "$WORK/logs/lazy-fence-$series.log" |
        sed "s/^\(PASS\|FAIL\) lazy fence: /\1 lazy fence (torch $series): /" | tee -a "$CHECKS"
    else
      fail "lazy: lazy_fence.py ran with torch $series" "lazy-fence-$series"
      tail -25 "$WORK/logs/lazy-fence-$series.err"
    fi
  done
fi

# ---- backward hooks: block swapping, with and without compiled autograd --
echo "run.sh: backward-hook experiment on decorate/ ..."
if TORCHINDUCTOR_CACHE_DIR="$WORK/inductor-backward" in_tree "$WORK/decorate" \
  "$PY" "$HERE/compile_backward.py" "$WORK/decorate" --json "$WORK/backward.json" \
  >"$WORK/logs/compile-backward.log" 2>"$WORK/logs/compile-backward.err"; then
  grep '^# ' "$WORK/logs/compile-backward.err" || true
  cp "$WORK/backward.json" "$CACHE/torch-tier/backward.json"
  "$PY" "$HERE/verdict_backward.py" "$WORK/backward.json" --label decorate \
    --checks "$CHECKS" --table "$CACHE/torch-tier/backward.md" || true
  # Negative controls: the verdict must fail on a summary where hookfence
  # had fenced a hook, or where a fence costs nothing under compiled autograd.
  for kind in fenced free-fence; do
    "$PY" "$HERE/doctor_backward.py" "$WORK/backward.json" "$WORK/backward-$kind.json" "$kind"
    check_fails "backward: the verdict fails on a summary doctored to $kind" \
      "$PY" "$HERE/verdict_backward.py" "$WORK/backward-$kind.json"
  done
else
  fail "decorate: compile_backward.py ran" "compile-backward"
  tail -25 "$WORK/logs/compile-backward.err"
fi

# ---- what a hook runs at backward time (discovered_by: applied) ------------
# applied_backward.py: a hook hands a helper an autograd Function and a
# closure the Function calls at backward time. --check fails on it, --apply
# fences the hook and the closure, and the fenced file still runs: eager and
# torch.compile give the same gradients, the closure runs once per backward
# and carries dynamo's marker (which the pristine file's does not).
cp "$HERE/applied_backward.py" "$WORK/applied_backward.py"
check_fails "applied: --check fails before --apply" "$HOOKFENCE" --check "$WORK/applied_backward.py"
check "applied: hookfence --apply" "$HOOKFENCE" --apply "$WORK/applied_backward.py"
check "applied: the fenced closure compiles to eager's gradients" \
  "$PY" "$WORK/applied_backward.py" --expect-fenced
check "applied: the pristine file runs the same" "$PY" "$HERE/applied_backward.py"
check_fails "applied: the pristine file's closure carries no marker" \
  "$PY" "$HERE/applied_backward.py" --expect-fenced

# ---- negative controls: remove one fence, the checks must notice ----------
for s in "${STRATEGIES[@]}"; do
  check "$s: remove one fence from hooks.py" "$PY" "$HERE/unfence_one.py" "$WORK/$s/accelerate/hooks.py"
  check_fails "$s: marker check fails with one fence removed" \
    in_tree "$WORK/$s" "$PY" "$HERE/check_markers.py" "$WORK/$s"
  if [[ $EMIT_PYTEST == 1 ]]; then
    check_fails "$s: emitted pytest fails with one fence removed" \
      in_tree "$WORK/$s" "$PY" -m pytest -q -p no:cacheprovider --rootdir "$WORK/$s" "$WORK/$s/test_hookfence_fences.py"
  fi
done

# ---- summary ----------------------------------------------------------------
passed="$(grep -c '^PASS ' "$CHECKS" || true)"
failed="$(grep -c '^FAIL ' "$CHECKS" || true)"
if [[ $failed != 0 ]]; then
  echo "failed checks:"
  grep '^FAIL ' "$CHECKS" | sed 's/^/  /'
fi
echo "figures: $CACHE/torch-tier/results.md, $CACHE/torch-tier/backward.md"
echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
