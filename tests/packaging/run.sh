#!/usr/bin/env bash
# Packaging test: the Python wheel, `pip install .` and the pre-commit hooks,
# all for real.
#
#  1. `maturin build --release` builds the wheel; it is installed into a fresh
#     venv (no index) and the installed `hookfence` is run from PATH on
#     examples/offload_project (dry run, --check, -q) and on a copy of it
#     (--apply, then --check passes and a second --apply changes nothing).
#     The wheel carries LICENSE-MIT and LICENSE-APACHE (dist-info/licenses/,
#     same bytes, named in METADATA); `cargo package --list` has them too.
#  2. `pip install <checkout>` into another fresh venv (pip builds the wheel
#     through maturin's PEP 517 backend) gives a working `hookfence` too.
#  3. The checkout's working tree is copied into a git repository with one
#     commit, and a throwaway repository uses its .pre-commit-hooks.yaml
#     through the real pre-commit: the check hook fails on unfenced hooks,
#     skips non-Python files, the fix hook fences them, the check hook then
#     passes, `git commit` with the installed hook refuses an unfenced file,
#     and the README's whole-tree variant (pass_filenames: false, args: [.])
#     finds a hook whose base class is in a file that was not passed.
#
# Needs: python3 with venv, git, the Rust toolchain (cargo) and a C compiler,
# and PyPI (maturin and pre-commit, pinned below, are installed once into
# $HOOKFENCE_CACHE/pkg-venv; pip fetches maturin again for its isolated
# builds). The release build reuses $CARGO_TARGET_DIR (default: the checkout's
# target/). pre-commit's store is $HOOKFENCE_CACHE/pre-commit; its throwaway
# repositories live beside it at fixed paths, so an unchanged tree reuses the
# hook environment pre-commit built last time (`pre-commit gc` drops old ones).
#
# HOOKFENCE_PACKAGING_KEEP=1 keeps the scratch directory (each command's
# output is in its log/). Ends with "N passed, M failed" alone on a line and
# exits 1 if any check failed.

# Checks chain as `check && next-check || true`, helpers run through `run`,
# and some single quotes hold backticks on purpose:
# shellcheck disable=SC2015,SC2016,SC2317
set -euo pipefail

MATURIN_VERSION=1.16.0
PRE_COMMIT_VERSION=4.7.0

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${HOOKFENCE_CACHE:-$HOME/.cache/hookfence}
PYTHON=${PYTHON:-python3}
TOOLS=$CACHE/pkg-venv
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
export PRE_COMMIT_HOME=$CACHE/pre-commit
export PRE_COMMIT_COLOR=never NO_COLOR=1 CARGO_TERM_COLOR=never
export PIP_DISABLE_PIP_VERSION_CHECK=1
EXAMPLE=examples/offload_project
FENCE='+    @torch.compiler.disable()'

WORK=$(mktemp -d "${TMPDIR:-/tmp}/hookfence-packaging.XXXXXX")
if [[ -n ${HOOKFENCE_PACKAGING_KEEP:-} ]]; then
  echo "# logs kept in $WORK"
else
  trap 'rm -rf "$WORK"' EXIT
fi

# git for the throwaway repositories only: no user or system configuration.
cat >"$WORK/gitconfig" <<'EOF'
[user]
	name = hookfence packaging test
	email = packaging-test@hookfence.invalid
[init]
	defaultBranch = main
[commit]
	gpgsign = false
EOF
export GIT_CONFIG_GLOBAL=$WORK/gitconfig GIT_CONFIG_NOSYSTEM=1

passed=0
failed=0
step=0
LAST_OUT=
LAST_ERR=

ok() {
  passed=$((passed + 1))
  echo "ok   - $1"
}

not_ok() {
  failed=$((failed + 1))
  echo "FAIL - $1"
  shift
  for line in "$@"; do echo "       $line"; done
  if [[ -n $LAST_OUT ]]; then
    echo "       --- last command's stdout (tail) ---"
    tail -n 25 "$LAST_OUT" | sed 's/^/       | /'
    echo "       --- last command's stderr (tail) ---"
    tail -n 25 "$LAST_ERR" | sed 's/^/       | /'
  fi
}

finish() {
  echo "# done in ${SECONDS}s"
  echo "$passed passed, $failed failed"
  if ((failed > 0)); then exit 1; fi
  exit 0
}

# run CMD...: runs it with stdout and stderr captured, sets RC.
run() {
  step=$((step + 1))
  LAST_OUT=$WORK/log/$step.out
  LAST_ERR=$WORK/log/$step.err
  mkdir -p "$WORK/log"
  RC=0
  "$@" >"$LAST_OUT" 2>"$LAST_ERR" </dev/null || RC=$?
}

# expect_rc NAME CODE CMD...: runs CMD, passes if it exits with CODE.
expect_rc() {
  local name=$1 code=$2
  shift 2
  run "$@"
  if [[ $RC == "$code" ]]; then
    ok "$name"
  else
    not_ok "$name" "expected exit $code, got $RC: $*"
    return 1
  fi
}

# expect_in NAME FILE TEXT: FILE contains the fixed string TEXT.
expect_in() {
  if grep -qF -- "$3" "$2"; then
    ok "$1"
  else
    not_ok "$1" "no line containing '$3' in $(basename "$2")"
    return 1
  fi
}

expect_eq() {
  if [[ $2 == "$3" ]]; then
    ok "$1"
  else
    not_ok "$1" "expected '$3', got '$2'"
    return 1
  fi
}

tree_sum() {
  (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
}

# --- tools -------------------------------------------------------------------

tools_ready() {
  [[ -x $TOOLS/bin/maturin && -x $TOOLS/bin/pre-commit ]] &&
    [[ $("$TOOLS/bin/maturin" --version 2>/dev/null) == "maturin $MATURIN_VERSION" ]] &&
    [[ $("$TOOLS/bin/pre-commit" --version 2>/dev/null) == "pre-commit $PRE_COMMIT_VERSION" ]]
}

install_tools() {
  if tools_ready; then return 0; fi
  rm -rf "$TOOLS"
  "$PYTHON" -m venv "$TOOLS" &&
    "$TOOLS/bin/python" -m pip install -q "maturin==$MATURIN_VERSION" "pre-commit==$PRE_COMMIT_VERSION" &&
    tools_ready
}

run install_tools
if [[ $RC == 0 ]]; then
  ok "maturin $MATURIN_VERSION and pre-commit $PRE_COMMIT_VERSION in $TOOLS"
else
  not_ok "install maturin $MATURIN_VERSION and pre-commit $PRE_COMMIT_VERSION into $TOOLS"
  finish
fi

# The one source of truth for the version.
cargo_version() {
  cargo metadata --no-deps --format-version 1 --manifest-path "$ROOT/Cargo.toml" |
    "$PYTHON" -c 'import json, sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "hookfence"))'
}
run cargo_version
if [[ $RC == 0 ]]; then
  VERSION=$(cat "$LAST_OUT")
  ok "version from Cargo.toml: $VERSION"
else
  not_ok "read the version from Cargo.toml"
  finish
fi
echo "# CARGO_TARGET_DIR=$CARGO_TARGET_DIR"

# in_root CMD...: CMD run from the checkout (paths in its output relative to it).
in_root() { (cd "$ROOT" && "$@"); }

# smoke VENV LABEL: the venv's hookfence, found on PATH, on the example.
smoke() {
  local venv=$1 label=$2
  local -a hf=(env "PATH=$venv/bin:$PATH" hookfence)

  run env "PATH=$venv/bin:$PATH" sh -c 'command -v hookfence'
  expect_eq "$label: hookfence on PATH is the venv's" "$(cat "$LAST_OUT")" "$venv/bin/hookfence" || return 0

  run "$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("hookfence"))'
  expect_eq "$label: installed distribution's version is Cargo.toml's" "$(cat "$LAST_OUT")" "$VERSION" || true

  expect_rc "$label: --version exits 0" 0 "${hf[@]}" --version &&
    expect_eq "$label: --version prints Cargo.toml's version" "$(cat "$LAST_OUT")" "hookfence $VERSION" || true

  local before
  before=$(tree_sum "$ROOT/$EXAMPLE")
  expect_rc "$label: dry run on $EXAMPLE exits 0" 0 in_root "${hf[@]}" "$EXAMPLE" && {
    expect_in "$label: dry run diff adds the fence" "$LAST_OUT" "$FENCE" || true
    expect_in "$label: dry run diff names the file" "$LAST_OUT" "+++ b/$EXAMPLE/offload_project/hooks.py" || true
    expect_in "$label: dry run summary on stderr" "$LAST_ERR" "Would fence" || true
  } || true

  expect_rc "$label: --check on $EXAMPLE exits 1" 1 in_root "${hf[@]}" --check "$EXAMPLE" &&
    expect_in "$label: --check lists the unfenced hooks as path:line:col" "$LAST_OUT" "$EXAMPLE/offload_project/hooks.py:" || true
  expect_rc "$label: --check -q exits 1" 1 in_root "${hf[@]}" --check -q "$EXAMPLE" &&
    expect_eq "$label: --check -q writes nothing to stderr" "$(cat "$LAST_ERR")" "" || true
  expect_eq "$label: dry run and --check left $EXAMPLE untouched" "$(tree_sum "$ROOT/$EXAMPLE")" "$before" || true

  local copy=$WORK/$label-example
  rm -rf "$copy"
  cp -R "$ROOT/$EXAMPLE" "$copy"
  expect_rc "$label: --apply -q on a copy exits 0" 0 "${hf[@]}" --apply -q "$copy" &&
    expect_in "$label: --apply wrote the fence" "$copy/offload_project/hooks.py" "    @torch.compiler.disable()" || true
  expect_rc "$label: --check after --apply exits 0" 0 "${hf[@]}" --check "$copy" || true
  before=$(tree_sum "$copy")
  expect_rc "$label: second --apply exits 0" 0 "${hf[@]}" --apply "$copy" &&
    expect_eq "$label: second --apply changes nothing" "$(tree_sum "$copy")" "$before" || true
}

# --- 1. the wheel ----------------------------------------------------------

echo "# 1. maturin build --release; the wheel in a fresh venv" "(${SECONDS}s)"
WHEELS=$WORK/wheels
WHEEL=
if expect_rc "maturin build --release" 0 \
  env -C "$ROOT" "$TOOLS/bin/maturin" build --release --out "$WHEELS"; then
  shopt -s nullglob
  wheels=("$WHEELS"/hookfence-"$VERSION"-py3-none-*.whl)
  shopt -u nullglob
  if [[ ${#wheels[@]} == 1 ]]; then
    WHEEL=${wheels[0]}
    ok "one wheel, named with Cargo.toml's version: $(basename "$WHEEL")"
  else
    not_ok "one wheel named hookfence-$VERSION-py3-none-*.whl" "found: $(cd "$WHEELS" 2>/dev/null && echo *)"
  fi
fi

if [[ -n $WHEEL ]]; then
  run "$PYTHON" -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$WHEEL"
  expect_in "the wheel carries the executable as a script" "$LAST_OUT" "hookfence-$VERSION.data/scripts/hookfence" || true
  # The licence texts, byte for byte, where PEP 639 puts them, and named in
  # the metadata.
  for licence in LICENSE-MIT LICENSE-APACHE; do
    run "$PYTHON" -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' \
      "$WHEEL" "hookfence-$VERSION.dist-info/licenses/$licence"
    if [[ $RC == 0 ]] && cmp -s "$LAST_OUT" "$ROOT/$licence"; then
      ok "the wheel carries $licence as hookfence-$VERSION.dist-info/licenses/$licence"
    else
      not_ok "the wheel carries $licence as hookfence-$VERSION.dist-info/licenses/$licence" "exit $RC, or not the same bytes as $licence"
    fi
  done
  run "$PYTHON" -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' \
    "$WHEEL" "hookfence-$VERSION.dist-info/METADATA"
  expect_in "the wheel's METADATA names LICENSE-MIT" "$LAST_OUT" "License-File: LICENSE-MIT" || true
  expect_in "the wheel's METADATA names LICENSE-APACHE" "$LAST_OUT" "License-File: LICENSE-APACHE" || true
  expect_in "the wheel's METADATA has the licence expression" "$LAST_OUT" "MIT OR Apache-2.0" || true

  VENV_WHEEL=$WORK/venv-wheel
  if expect_rc "fresh venv for the wheel" 0 "$PYTHON" -m venv "$VENV_WHEEL" &&
    expect_rc "pip install the wheel (no index)" 0 "$VENV_WHEEL/bin/python" -m pip install --no-index "$WHEEL"; then
    smoke "$VENV_WHEEL" wheel
  fi
fi

# --- 1b. the crate ------------------------------------------------------------

echo "# 1b. cargo package --list: what a crate upload would carry" "(${SECONDS}s)"
if expect_rc "cargo package --list" 0 env -C "$ROOT" cargo package --list --allow-dirty --offline; then
  for licence in LICENSE-MIT LICENSE-APACHE; do
    if grep -qx -- "$licence" "$LAST_OUT"; then
      ok "the crate includes $licence"
    else
      not_ok "the crate includes $licence"
    fi
  done
fi

# --- 2. pip install . ------------------------------------------------------

echo "# 2. pip install . (from the checkout) into a fresh venv" "(${SECONDS}s)"
VENV_SRC=$WORK/venv-src
if expect_rc "fresh venv for pip install ." 0 "$PYTHON" -m venv "$VENV_SRC" &&
  expect_rc "pip install . (maturin's PEP 517 backend)" 0 \
    env -C "$ROOT" "$VENV_SRC/bin/python" -m pip install .; then
  smoke "$VENV_SRC" pip-install-dot
fi

# --- 3. pre-commit ---------------------------------------------------------

echo "# 3. pre-commit $PRE_COMMIT_VERSION with this checkout's .pre-commit-hooks.yaml" "(${SECONDS}s)"
PC=$TOOLS/bin/pre-commit
# Fixed paths: pre-commit keys its store by repository path and rev, and the
# snapshot's commit id depends only on the tree, so an unchanged tree reuses
# the hook environment built last time.
PC_DIR=$CACHE/pre-commit-test
HOOK_REPO=$PC_DIR/hookfence
CONSUMER=$PC_DIR/consumer

# The checkout's working tree (tracked and untracked files, ignored ones left
# out) as a git repository with one commit; prints the commit id.
snapshot_checkout() {
  rm -rf "$HOOK_REPO" && mkdir -p "$HOOK_REPO" &&
    git -C "$ROOT" ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do
        if [[ -f $ROOT/$f || -L $ROOT/$f ]]; then printf '%s\0' "$f"; fi
      done |
      tar -C "$ROOT" --null -T - -cf - | tar -C "$HOOK_REPO" -xf - &&
    git -C "$HOOK_REPO" init -q &&
    git -C "$HOOK_REPO" add -A &&
    GIT_AUTHOR_DATE='2000-01-01T00:00:00Z' GIT_COMMITTER_DATE='2000-01-01T00:00:00Z' \
      git -C "$HOOK_REPO" commit -q -m "hookfence working tree" &&
    git -C "$HOOK_REPO" rev-parse HEAD
}

# write_late_hook FILE: one offload hook, registered in the same file.
write_late_hook() {
  printf '%s\n' \
    'import torch' \
    '' \
    '' \
    'def _onload(module, args):' \
    '    module.to("cuda", non_blocking=True)' \
    '    return args' \
    '' \
    '' \
    'def attach(model):' \
    '    model.register_forward_pre_hook(_onload)' >"$1"
}

# make_consumer REV: a throwaway repository with the example's unfenced hooks,
# a Markdown file and a config naming both hooks (the fix on demand only).
make_consumer() {
  rm -rf "$CONSUMER" && mkdir -p "$CONSUMER" &&
    cp -R "$ROOT/$EXAMPLE/offload_project" "$CONSUMER/offload_project" &&
    printf '# Notes\n\nNot Python: `def pre_forward(self, module): module.to("cuda")`\n' >"$CONSUMER/NOTES.md" &&
    printf '%s\n' \
      'repos:' \
      "  - repo: $HOOK_REPO" \
      "    rev: $1" \
      '    hooks:' \
      '      - id: hookfence' \
      '      - id: hookfence-fix' \
      '        stages: [manual]' >"$CONSUMER/.pre-commit-config.yaml" &&
    git -C "$CONSUMER" init -q &&
    git -C "$CONSUMER" add -A
}

in_consumer() { (cd "$CONSUMER" && "$@"); }
head_of_consumer() { git -C "$CONSUMER" rev-parse -q --verify HEAD || true; }

consumer_ready=
mkdir -p "$PC_DIR"
exec 9>"$PC_DIR/lock" # one run at a time uses the fixed paths
if ! flock -w 1800 9; then
  LAST_OUT=
  not_ok "lock $PC_DIR/lock (another run holds it)"
  finish
fi
if run snapshot_checkout && [[ $RC == 0 ]]; then
  REV=$(tail -n 1 "$LAST_OUT")
  ok "working tree snapshot committed as $REV"
  if expect_rc "throwaway repository with unfenced hooks" 0 make_consumer "$REV"; then
    consumer_ready=1
  fi
else
  not_ok "working tree snapshot committed to a git repository"
fi

if [[ -n $consumer_ready ]]; then
  # The first run installs the hook environment: pip builds the wheel with
  # maturin from the snapshot, so this is where a missing Rust would show.
  run in_consumer "$PC" run hookfence --all-files
  if [[ $RC == 1 ]] && grep -qF "unfenced offload hook" "$LAST_OUT"; then
    ok "pre-commit: the hookfence hook fails on unfenced offload hooks"
    expect_in "pre-commit: ... listing them as path:line:col" "$LAST_OUT" "offload_project/hooks.py:" || true
  elif ! grep -qF -- "- hook id: hookfence" "$LAST_OUT"; then
    not_ok "pre-commit: install the hook environment and run the hookfence hook" "exit $RC"
    consumer_ready=
  else
    not_ok "pre-commit: the hookfence hook fails on unfenced offload hooks" "exit $RC"
  fi
fi

if [[ -n $consumer_ready ]]; then
  expect_rc "pre-commit: hookfence on a Markdown file only exits 0" 0 \
    in_consumer "$PC" run hookfence --files NOTES.md &&
    expect_in "pre-commit: ... reporting no files to check" "$LAST_OUT" "(no files to check)" || true

  before=$(tree_sum "$CONSUMER/offload_project")
  expect_rc "pre-commit: hookfence-fix fails when it changed files" 1 \
    in_consumer "$PC" run --hook-stage manual hookfence-fix --all-files &&
    expect_in "pre-commit: ... saying files were modified" "$LAST_OUT" "files were modified by this hook" || true
  if [[ $(tree_sum "$CONSUMER/offload_project") != "$before" ]] &&
    grep -qF "    @torch.compiler.disable()" "$CONSUMER/offload_project/hooks.py"; then
    ok "pre-commit: hookfence-fix fenced the hooks"
  else
    not_ok "pre-commit: hookfence-fix fenced the hooks"
  fi
  expect_in "pre-commit: hookfence-fix left NOTES.md alone" "$CONSUMER/NOTES.md" 'module.to("cuda")' || true

  in_consumer git add -A
  expect_rc "pre-commit: hookfence-fix passes on fenced files" 0 \
    in_consumer "$PC" run --hook-stage manual hookfence-fix --all-files || true
  expect_rc "pre-commit: the hookfence hook passes after the fix" 0 \
    in_consumer "$PC" run hookfence --all-files || true

  # The git hook: pre-commit passes the staged Python files.
  expect_rc "pre-commit install" 0 in_consumer "$PC" install || true
  expect_rc "git commit of the fenced tree passes the hook" 0 in_consumer git commit -q -m fenced || true
  head_before=$(head_of_consumer)
  write_late_hook "$CONSUMER/late.py"
  in_consumer git add late.py
  run in_consumer git commit -q -m "unfenced hook"
  if [[ $RC != 0 && $(head_of_consumer) == "$head_before" ]] && grep -qF "late.py:" "$LAST_OUT" "$LAST_ERR"; then
    ok "git commit of an unfenced hook is refused, naming late.py"
  else
    not_ok "git commit of an unfenced hook is refused, naming late.py" "exit $RC"
  fi
  expect_rc "pre-commit: hookfence-fix --files late.py fails (it changed late.py)" 1 \
    in_consumer "$PC" run --hook-stage manual hookfence-fix --files late.py || true
  expect_in "pre-commit: ... fencing the hook in late.py" "$CONSUMER/late.py" "@torch.compiler.disable()" || true
  in_consumer git add late.py
  expect_rc "git commit passes once late.py is fenced" 0 in_consumer git commit -q -m "fenced hook" || true

  # The README's whole-tree variant: a hook class whose base class is in a
  # file that is not passed is still found.
  printf '%s\n' 'from accelerate.hooks import ModelHook' '' '' \
    'class OffloadBase(ModelHook):' '    pass' >"$CONSUMER/offload_base.py"
  printf '%s\n' 'from offload_base import OffloadBase' '' '' 'class Onload(OffloadBase):' \
    '    def pre_forward(self, module, *args, **kwargs):' '        module.to("cuda")' \
    '        return args, kwargs' >"$CONSUMER/onload.py"
  sed 's/^      - id: hookfence$/&\n        pass_filenames: false\n        args: [.]/' \
    "$CONSUMER/.pre-commit-config.yaml" >"$CONSUMER/whole-tree.yaml"
  in_consumer git add offload_base.py onload.py whole-tree.yaml
  run in_consumer "$PC" run -c whole-tree.yaml hookfence --files onload.py
  if [[ $RC == 1 ]] && grep -qF "onload.py:" "$LAST_OUT"; then
    ok "pre-commit: with pass_filenames: false and args: [.] a base class in another file counts"
  else
    not_ok "pre-commit: with pass_filenames: false and args: [.] a base class in another file counts" "exit $RC"
  fi

  # Drop the hook environments of older snapshots (no config names them now).
  run "$PC" gc
fi

finish
