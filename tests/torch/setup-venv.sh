#!/usr/bin/env bash
# Creates (or reuses) the real-torch venv for the torch proof tier:
#   ${HOOKFENCE_CACHE:-~/.cache/hookfence}/torch-venv
# and prints its python's path on stdout (progress goes to stderr).
#
# PyPI has no CPU-only Linux torch wheel, so this installs the CUDA wheel with
# --no-deps plus exactly what importing torch (and inductor on CPU) needs: its
# pure-Python deps and the nvidia libraries libtorch links against. triton,
# cuda-bindings and cusolver are left out (not needed on CPU). The nvidia pins
# are what torch 2.15.0's METADATA requires (nvidia-*-cu13 directly; the rest
# through cuda-toolkit[...]==13.2.2, whose METADATA pins them as ==X.*, plus
# nvidia-nvjitlink>=13.2.86,<14 resolved to the version current when written).
# Every package is installed with --no-deps, so the venv holds exactly the list
# below (about 2.5 GB; ~1.5 min on a fresh machine).
#
# A stamp file holds the sha256 of the recipe (the lists below and the Python
# version); a venv whose stamp matches is reused as is.
#
# `setup-venv.sh 2.6` instead makes ${HOOKFENCE_CACHE:-~/.cache/hookfence}/torch26-venv:
# torch 2.6.0 (the oldest release the lazy fence is measured on), the
# nvidia cu12 libraries its `import torch` preloads (pins from its METADATA),
# its pure-Python deps, and nothing else (about 2.5 GB; ~1.5 min).
set -euo pipefail

CACHE="${HOOKFENCE_CACHE:-$HOME/.cache/hookfence}"
VENV="$CACHE/torch-venv"
SERIES="${1:-2.15}"
STAMP="$VENV/.hookfence-recipe"
PYTHON="${PYTHON:-python3}"

TORCH_AND_NATIVE_LIBS='
torch==2.15.0
nvidia-cudnn-cu13==9.26.0.51
nvidia-cusparselt-cu13==0.8.1
nvidia-nccl-cu13==2.30.7
nvidia-nvshmem-cu13==3.7.2
nvidia-cublas==13.4.1.3
nvidia-cuda-cupti==13.2.86
nvidia-cuda-nvrtc==13.2.86
nvidia-cuda-runtime==13.2.86
nvidia-cufft==12.2.0.57
nvidia-cufile==1.17.1.22
nvidia-cusparse==12.7.10.12
nvidia-nvjitlink==13.5.37
'
# torch's pure-Python deps (and theirs: mpmath, MarkupSafe).
TORCH_PY_DEPS='
filelock==4.3.1
typing-extensions==4.16.0
setuptools==84.2.1
sympy==1.14.0
mpmath==1.3.0
networkx==3.6.1
jinja2==3.1.6
MarkupSafe==3.0.4
fsspec==2026.9.0
numpy==2.4.6
'
# accelerate 1.12.0 and what `import accelerate` needs. huggingface_hub's
# network deps (httpx2, hf-xet, click) are left out: accelerate imports only
# its constants, logging and serialization helpers.
ACCELERATE='
accelerate==1.12.0
packaging==26.4
psutil==7.2.2
PyYAML==6.0.4
safetensors==0.8.0
huggingface_hub==2.4.0
tqdm==4.70.1
'
PYTEST='
pytest==9.2.0
iniconfig==2.3.1
pluggy==1.7.0
Pygments==2.21.0
'

if [[ $SERIES == 2.6 ]]; then
  VENV="$CACHE/torch26-venv"
  STAMP="$VENV/.hookfence-recipe"
  TORCH_AND_NATIVE_LIBS='
torch==2.6.0
nvidia-cuda-nvrtc-cu12==12.4.127
nvidia-cuda-runtime-cu12==12.4.127
nvidia-cuda-cupti-cu12==12.4.127
nvidia-cudnn-cu12==9.1.0.70
nvidia-cublas-cu12==12.4.5.8
nvidia-cufft-cu12==11.2.1.3
nvidia-curand-cu12==10.3.5.147
nvidia-cusolver-cu12==11.6.1.9
nvidia-cusparse-cu12==12.3.1.170
nvidia-cusparselt-cu12==0.6.2
nvidia-nccl-cu12==2.21.5
nvidia-nvtx-cu12==12.4.127
nvidia-nvjitlink-cu12==12.4.127
'
  TORCH_PY_DEPS='
filelock==4.3.1
typing-extensions==4.16.0
sympy==1.13.1
mpmath==1.3.0
networkx==3.6.1
jinja2==3.1.6
MarkupSafe==3.0.4
fsspec==2026.9.0
numpy==2.4.6
'
  ACCELERATE=''
  PYTEST=''
elif [[ $SERIES != 2.15 ]]; then
  echo "setup-venv: unknown torch series $SERIES (2.15 or 2.6)" >&2
  exit 2
fi

py_version="$("$PYTHON" -c 'import sys; print(sys.version.split()[0])')"
recipe_hash="$(printf '%s\n' "python $py_version" "$TORCH_AND_NATIVE_LIBS" "$TORCH_PY_DEPS" "$ACCELERATE" "$PYTEST" | sha256sum | cut -d' ' -f1)"

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$recipe_hash" && -x "$VENV/bin/python" ]]; then
  echo "setup-venv: reusing $VENV (recipe ${recipe_hash:0:12})" >&2
  echo "$VENV/bin/python"
  exit 0
fi

echo "setup-venv: building $VENV (recipe ${recipe_hash:0:12}; ~2.5 GB download)" >&2
rm -rf "$VENV"
mkdir -p "$CACHE"
"$PYTHON" -m venv "$VENV"
pip_install() {
  # shellcheck disable=SC2086 # the lists are whitespace-separated on purpose
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
    --no-deps --only-binary=:all: $1 >&2
}
pip_install "$TORCH_AND_NATIVE_LIBS"
pip_install "$TORCH_PY_DEPS"
if [[ $SERIES == 2.6 ]]; then
  "$VENV/bin/python" - >&2 <<'EOF'
import torch
from torch._dynamo.eval_frame import skip_code  # noqa: F401
assert torch.__version__.startswith("2.6.0"), torch.__version__
assert torch.equal(torch.compile(lambda x: x * 2, backend="eager")(torch.ones(2)), torch.full((2,), 2.0))
print(f"setup-venv: torch {torch.__version__}: ok")
EOF
  echo "$recipe_hash" >"$STAMP"
  echo "$VENV/bin/python"
  exit 0
fi
pip_install "$ACCELERATE"
pip_install "$PYTEST"

# Verify: torch imports and runs, inductor compiles on CPU with the system C
# compiler, accelerate and pytest import.
"$VENV/bin/python" - >&2 <<'EOF'
import torch, accelerate, accelerate.hooks, pytest  # noqa: F401
assert torch.__version__.startswith("2.15.0"), torch.__version__
assert accelerate.__version__ == "1.12.0", accelerate.__version__
f = torch.compile(lambda x: torch.relu(x) * 2)
x = torch.randn(8)
assert torch.equal(f(x), torch.relu(x) * 2)
print(f"setup-venv: torch {torch.__version__}, accelerate {accelerate.__version__}, "
      f"pytest {pytest.__version__}: ok")
EOF
echo "$recipe_hash" >"$STAMP"
echo "$VENV/bin/python"
