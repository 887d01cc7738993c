#!/usr/bin/env bash
# Checks the acceptance capture of draft evaluations against the real vLLM server of
# ../shared/tools/real-vllm (CPU, tiny random-weight model), not part of CI. Two servers of the
# same target, each with a draft (`draft_model`, 3 speculative tokens, per-request figures):
# one with the target itself as its draft, one with a perturbed copy of it
# (scripts/make-perturbed-draft.py, made once under ~/.cache/real-vllm/). The example
# engine/examples/real_vllm_acceptance.rs then, on PROMPTS short questions:
#  1. evaluates the self draft: every sample has a figure and every figure is exactly 4.0
#     (every draft token accepted at temperature 0);
#  2. evaluates the perturbed draft on the same prompts, each in the same thinking mode;
#  3. checks, for each, that the app's pooled figure (1 + Σ accepted ÷ Σ steps over the samples)
#     equals the server's own from its /metrics counters over the run (1 + Δaccepted ÷ Δdrafts),
#     and that the comparison of the two finds the perturbed draft measurably lower (the 95%
#     interval of the difference below zero).
# Takes about 1.5 minutes for 64 prompts and 2 for 512 on a 2-core machine once the example is
# built (most of it starting the two servers, half a minute each; the first build of the example
# and the engine's dependencies takes about 15 minutes). Needs the real-vLLM install of
# scripts/bench-generation.sh (../shared/tools/real-vllm/setup.sh, once, about 7 GB).
# DRAFT_NOISE sets the perturbation (default 0.3: about 3 of 4 tokens per step; 1.0 accepts
# nothing), ACCEPTANCE_PORTS the two ports (default "8021 8022").
#   usage: scripts/real-vllm-acceptance.sh [PROMPTS]
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_postgres
export DATABASE_URL=$PG_SERVER_URL/postgres SQLX_OFFLINE=true
prompts=${1:-64}
tools=$ROOT/../shared/tools/real-vllm
[ -x "$tools/serve.sh" ] || die "expected the real-vLLM tools in $tools"
venv=$HOME/.cache/real-vllm/venv model=$HOME/.cache/real-vllm/tiny-model
[ -x "$venv/bin/vllm" ] && [ -f "$model/config.json" ] \
  || die "the real vLLM server is not installed: run $tools/setup.sh $venv $model (once, about 7 GB)"
noise=${DRAFT_NOISE:-0.3} spec_tokens=3
draft=$HOME/.cache/real-vllm/tiny-draft-noise-$noise
if [ ! -f "$draft/perturbed.json" ]; then
  say "making the perturbed draft (noise $noise) in $draft"
  "$venv/bin/python" "$ROOT/scripts/make-perturbed-draft.py" "$model" "$draft" "$noise"
fi
read -r self_port other_port <<< "${ACCEPTANCE_PORTS:-8021 8022}"
pids=()
stop_servers() { for pid in "${pids[@]}"; do kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true; done; }
trap stop_servers EXIT
serve_with_draft() { # PORT DRAFT_DIR
  bash "$tools/serve.sh" "$venv" "$model" "$1" \
    --speculative-config "{\"method\":\"draft_model\",\"model\":\"$2\",\"num_speculative_tokens\":$spec_tokens}" \
    --per-request-spec-decode-metrics summary
}
# One after the other: two servers starting at once on two cores can outlast serve.sh's wait.
say "starting vLLM with the target as its own draft on 127.0.0.1:$self_port"
pids+=("$(serve_with_draft "$self_port" "$model")")
say "starting vLLM with the perturbed draft on 127.0.0.1:$other_port"
pids+=("$(serve_with_draft "$other_port" "$draft")")
say "building and running the acceptance check ($prompts prompts)"
REAL_VLLM_SELF_URL=http://127.0.0.1:$self_port REAL_VLLM_OTHER_URL=http://127.0.0.1:$other_port \
  REAL_VLLM_OTHER_DRAFT=tiny-noise-$noise REAL_VLLM_SPEC_TOKENS=$spec_tokens \
  cargo run --locked -p engine --features engine/test-support --example real_vllm_acceptance -- "$prompts"
