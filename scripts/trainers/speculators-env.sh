#!/usr/bin/env bash
# Makes (idempotently) a virtual environment in which speculators 0.9.0 from PyPI imports and its
# data preprocessing (`speculators prepare-data`, speculators.data_generation.preprocessing) runs,
# reusing the real-vLLM venv's packages (vLLM, torch, transformers, ...) instead of downloading torch
# again: a .pth file adds that venv's site-packages after this venv's own, speculators and
# hs-connectors (imported by the `speculators` CLI) are installed with --no-deps, and only what the
# real-vLLM venv lacks is installed here (datasets 5.1.0 and its pyarrow/pandas/xxhash/multiprocess;
# an fsspec inside datasets' pin shadows the newer one). torchvision/torchaudio are not installed:
# nothing on the preprocessing path imports them. The real-vLLM venv is never modified.
# Prints the venv's python path (last line of stdout).
#   usage: speculators-env.sh [VENV_DIR] [REAL_VLLM_VENV]
#   defaults: ~/.cache/draft-studio/speculators-venv, ~/.cache/real-vllm/venv
set -euo pipefail
venv=${1:-$HOME/.cache/draft-studio/speculators-venv}
real=${2:-$HOME/.cache/real-vllm/venv}
SPECULATORS_VERSION=0.9.0
if ! "$real/bin/python" -c 'import vllm, torch, transformers' 2>/dev/null; then
  echo "no working real-vLLM venv at $real (run ../shared/tools/real-vllm/setup.sh first)" >&2
  exit 1
fi
py="$venv/bin/python"
if [ ! -x "$py" ]; then
  # Same interpreter version as the real-vLLM venv, so its compiled packages load.
  base=$("$real/bin/python" -c 'import sys; print(sys._base_executable)')
  "$base" -m venv "$venv"
fi
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
real_site=$("$real/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# addsitedir (not a bare path line) so the real venv's own .pth files are honoured too; it appends,
# so anything installed in this venv wins.
echo "import site; site.addsitedir('$real_site')" > "$site/zz-real-vllm.pth"
# Python 3.11's venv seeds an old setuptools (65) that would shadow the real venv's, which torch
# requires (>=77); drop ours (only when it is this venv's own copy).
if [ -d "$site/setuptools" ]; then
  "$py" -m pip uninstall -q -y --disable-pip-version-check setuptools
fi

ready() {
  "$py" - "$SPECULATORS_VERSION" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version
assert version("speculators") == sys.argv[1], version("speculators")
assert version("datasets") == "5.1.0", version("datasets")
import datasets, vllm, torch, transformers  # noqa: F401
from speculators.data_generation.preprocessing import build_speculator_training_dataset  # noqa: F401
import speculators.cli  # noqa: F401  (needs hs_connectors)
EOF
}

if ! ready; then
  pip=("$py" -m pip install -q --disable-pip-version-check --only-binary=:all:)
  "${pip[@]}" --no-deps "speculators==$SPECULATORS_VERSION" "hs-connectors==$SPECULATORS_VERSION"
  # speculators 0.9.0 accepts datasets>=4.0.0,<=5.1.0, but before 4.8.4 datasets' JSON loader turns
  # a `tools` list into Arrow structs unified across rows (null-filled foreign keys, reordered keys),
  # which changes the rendered tool schemas; pin the newest allowed. Its dependencies that the
  # real-vLLM venv already has (numpy, dill, huggingface-hub, ...) are seen through the .pth and not
  # reinstalled. pip then reports torchaudio/torchvision missing for speculators: expected (header).
  err=$(mktemp)
  "${pip[@]}" 'datasets==5.1.0' 2>"$err" || { cat "$err" >&2; rm -f "$err"; exit 1; }
  grep -v -e 'torchaudio' -e 'torchvision' -e "pip's dependency resolver does not currently" "$err" >&2 || true
  rm -f "$err"
  if ! ready; then
    echo "speculators venv at $venv is not usable; see the errors above" >&2
    "$py" -c 'from speculators.data_generation.preprocessing import build_speculator_training_dataset; import speculators.cli' >&2 || true
    exit 1
  fi
fi
echo "$py"
