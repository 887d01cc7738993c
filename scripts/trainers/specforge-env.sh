#!/usr/bin/env bash
# Prepares what scripts/trainers/specforge_check.py needs to run SpecForge's own data code (no sglang,
# no GPU): SpecForge's source at a fixed commit, extracted from a local git mirror (or a copy you
# already have), and a small venv that reuses the real-vLLM venv's torch/transformers/tokenizers
# through a .pth file and adds only `datasets` (which SpecForge's loaders use) on top. The real-vLLM
# venv is never modified. Idempotent: a second run changes nothing.
#   usage: scripts/trainers/specforge-env.sh [SPECFORGE_SRC_OR_MIRROR]
#   env:   SPECFORGE_COMMIT (a6b6b02), SPECFORGE_DIR (/tmp/specforge-a6b6b02),
#          BASE_VENV (~/.cache/real-vllm/venv), SPECFORGE_VENV (~/.cache/draft-studio/specforge-venv)
set -euo pipefail
commit=${SPECFORGE_COMMIT:-a6b6b02}
src=${1:-/work/.mirror/sgl-project+SpecForge/repo}
dest=${SPECFORGE_DIR:-/tmp/specforge-$commit}
base=${BASE_VENV:-$HOME/.cache/real-vllm/venv}
venv=${SPECFORGE_VENV:-$HOME/.cache/draft-studio/specforge-venv}
here=$(cd "$(dirname "$0")" && pwd)

# 1. SpecForge source.
if [ -f "$src/specforge/data/preprocessing.py" ]; then
  dest=$src                                   # an extracted tree was given: use it as it is
elif [ ! -f "$dest/specforge/data/preprocessing.py" ]; then
  git -C "$src" rev-parse --verify -q "$commit^{commit}" >/dev/null \
    || { echo "commit $commit not found in $src" >&2; exit 1; }
  mkdir -p "$dest.partial"
  git -C "$src" archive "$commit" | tar -x -C "$dest.partial"
  git -C "$src" rev-parse "$commit^{commit}" > "$dest.partial/.specforge-commit"
  rm -rf "$dest"; mv "$dest.partial" "$dest"
fi

# 2. The venv: same interpreter as the base venv, base site-packages appended via .pth.
"$base/bin/python" -c 'import torch, transformers, tokenizers, jinja2' \
  || { echo "base venv $base lacks torch/transformers (is the real-vLLM setup finished?)" >&2; exit 1; }
base_site=$("$base/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ ! -x "$venv/bin/python" ]; then
  interp=$("$base/bin/python" -c 'import sys; print(sys._base_executable)')
  mkdir -p "$(dirname "$venv")"
  "$interp" -m venv "$venv"
fi
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$base_site" > "$site/zz-real-vllm-base.pth"   # appended after the venv's own site-packages
if ! "$venv/bin/python" -c 'import datasets, pyarrow' 2>/dev/null; then
  # Only what SpecForge's data path imports beyond the base venv (datasets and its own deps:
  # pyarrow, pandas, xxhash, multiprocess). Requirements the base venv already satisfies are
  # seen through the .pth file and left alone; everything new lands in this venv only.
  "$venv/bin/python" -m pip install -q --disable-pip-version-check 'datasets==5.2.0'
fi
"$venv/bin/python" - "$dest" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import datasets, torch, transformers
from specforge.data.preprocessing import build_eagle3_dataset  # no sglang on this path
from specforge.data.prompt_builder import prepare_prompt_tasks
from specforge.utils import safe_conversations_generator, load_tokenizer
print(f"ok: datasets {datasets.__version__}, torch {torch.__version__}, transformers {transformers.__version__}")
PY
cat <<MSG
SpecForge $commit: $dest
venv:      $venv (base packages from $base_site)
check an export (our conversations file against our pre-tokenized file of the same samples):
  $venv/bin/python $here/specforge_check.py --specforge $dest --model TARGET_MODEL_DIR \\
      --route offline --chat-template qwen3.5 \\
      --conversations EXPORT/train.jsonl --tokenized TOKENIZED_EXPORT/train.jsonl
  --route offline              scripts/prepare_hidden_states.py (its flags: --chat-template, --is-preformatted, --max-length)
  --route online               specforge train, data.train_data_path (+ --is-preformatted, --train-only-last-turn)
  --route online-pretokenized  specforge train, data.prompts_path = the --tokenized file itself
MSG
