#!/usr/bin/env bash
# Trains a draft revision from a Draft Studio pre-tokenized export in one command (issue 47, item 2): the
# world's draft (scripts/world/make-world.sh) from its starting weights, on the export's input_ids and
# loss_mask exactly as exported, for a fixed budget of steps, seeded and deterministic on CPU
# (scripts/world/train_draft.py). A stand-in for SpecForge/speculators, which train EAGLE-3 heads on GPUs:
# same data path (export -> trainer -> served draft -> evaluation). Writes OUT_DIR as an HF folder with
# revision.json (the export, its sha256, the starting weights' hash, steps, seed, loss, time). Needs the
# real-vLLM venv of ../shared/tools/real-vllm (REAL_VLLM_VENV overrides it).
#   usage: scripts/world/train-draft.sh EXPORT_DIR OUT_DIR [--steps N] [--seed S] [--start DIR] [--lr X]
#   then:  DRAFT_DIR=OUT_DIR scripts/world/serve-world.sh 8040 draft
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${REAL_VLLM_VENV:-$HOME/.cache/real-vllm/venv}
[ -x "$venv/bin/python" ] || { echo "no real-vLLM venv in $venv: run ../shared/tools/real-vllm/setup.sh" >&2; exit 1; }
[ $# -ge 2 ] || { echo "usage: scripts/world/train-draft.sh EXPORT_DIR OUT_DIR [--steps N] [--seed S] [--start DIR]" >&2; exit 2; }
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} PYTHONDONTWRITEBYTECODE=1 exec "$venv/bin/python" "$here/train_draft.py" "$@"
