#!/usr/bin/env bash
# Feeds a fixed set, exported in each trainer preset, through the trainers' own data code and
# fails unless they build the ids the target saw (not part of CI: it installs vLLM, about 7 GB,
# once, and speculators 0.9.0 and SpecForge a6b6b02's data code beside it; about 5 minutes warm).
#
#  1. engine/examples/trainer_compat.rs exports the fixed set (plain, reasoning, system + two user
#     turns, a call answered by its result, parallel calls, a final call; tools with nested keys out
#     of order) in the speculators and SpecForge presets, with the server's ids per turn and per
#     conversation ending as the template renders a turn;
#  2. speculators' `build_speculator_training_dataset`, rendering through `vllm launch render`,
#     must build exactly the per-turn rows (ids and masks);
#  3. SpecForge's online trainer must load the pre-tokenized preset as written (ids and masks);
#  4. SpecForge's offline loader (`prepare_hidden_states.py`) and its online conversation route,
#     with the `qwen3.5` template, must build exactly the per-conversation ids, with no row
#     dropped; their loss masks are SpecForge's own and are printed, tallied by token.
#
# SpecForge is not on PyPI: its code comes from the mirror `fetch` made
# (/work/.mirror/sgl-project+SpecForge/repo) or a checkout given as SPECFORGE_SRC.
#   usage: scripts/trainer-compat.sh [OUT_DIR]     (default: a new temporary folder)
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_postgres
real=$ROOT/../shared/tools/real-vllm
venv=${REAL_VLLM_VENV:-$HOME/.cache/real-vllm/venv}
model=$HOME/.cache/real-vllm/tiny-model
tools_model=$HOME/.cache/real-vllm/tiny-tools-model
out=${1:-$(mktemp -d)}
bash "$real/setup.sh" "$venv" "$model" >/dev/null
[ -f "$tools_model/config.json" ] || "$venv/bin/python" scripts/make-tool-model.py "$model" "$tools_model"
speculators_python=$(bash scripts/trainers/speculators-env.sh | tail -n 1)
bash scripts/trainers/specforge-env.sh ${SPECFORGE_SRC:+"$SPECFORGE_SRC"} >/dev/null
specforge_python=${SPECFORGE_VENV:-$HOME/.cache/draft-studio/specforge-venv}/bin/python
specforge_dir=${SPECFORGE_DIR:-/tmp/specforge-${SPECFORGE_COMMIT:-a6b6b02}}
[ -n "${SPECFORGE_SRC:-}" ] && specforge_dir=$SPECFORGE_SRC

say "exporting the fixed set in each preset (into $out)"
REAL_VLLM_MODEL_DIR=$tools_model DATABASE_URL=$PG_SERVER_URL/postgres \
  cargo run -q -p engine --example trainer_compat -- "$out"
folder() { python3 -c "import json,sys; print(json.load(open('$out/folders.json'))['$1'])"; }

failed=0
check() { # name, command...
  local name=$1; shift
  say "$name"
  if "$@"; then echo "PASSED: $name"; else echo "FAILED: $name"; failed=1; fi
}
check "speculators 0.9.0: conversations preset rendered through vLLM = the server's ids per turn" \
  "$speculators_python" scripts/trainers/speculators_check.py --model "$tools_model" --seq-length 4096 \
  --conversations "$(folder speculators)/train.jsonl" --tokenized "$(folder speculators_rows)/train.jsonl"
check "SpecForge online: the pre-tokenized preset loads as written" \
  "$specforge_python" scripts/trainers/specforge_check.py --specforge "$specforge_dir" --model "$tools_model" \
  --route online-pretokenized --tokenized "$(folder specforge_online)/train.jsonl"
for route in offline online; do
  check "SpecForge $route (qwen3.5): the conversations preset gives the server's ids, SpecForge's masks" \
    "$specforge_python" scripts/trainers/specforge_check.py --specforge "$specforge_dir" --model "$tools_model" \
    --route $route --chat-template qwen3.5 --masks report --max-length 4096 \
    --conversations "$(folder specforge_offline)/train.jsonl" --tokenized "$(folder specforge_rows)/train.jsonl"
done
[ $failed = 0 ] || die "a trainer built something else from the export (above)"
say "every trainer built the server's ids from the export"
