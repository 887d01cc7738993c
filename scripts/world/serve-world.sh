#!/usr/bin/env bash
# Serves the world's target (scripts/world/make-world.sh) on the real vLLM CPU server of
# ../shared/tools/real-vllm as "tiny" on 127.0.0.1:PORT: the deepseek_r1 reasoning parser (set by
# serve.sh), the hermes tool parser with `tool_choice: auto`, and with `draft` the world's draft
# (`draft_model`, 3 speculative tokens, per-request spec-decode figures; SPEC_METRICS=summary|detailed,
# default detailed). Waits until /health answers and prints the server's process-group id; stop it
# with `kill -- -PID`. WORLD_DIR (default ~/.cache/draft-studio/world), REAL_VLLM_VENV, SPEC_TOKENS and
# DRAFT_DIR (another draft revision, e.g. one trained on an export) override the defaults; extra
# arguments after the first two go to `vllm serve`. Log: /tmp/real-vllm-PORT.log.
#   usage: scripts/world/serve-world.sh PORT [draft] [extra vllm serve flags...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tools=${REAL_VLLM_TOOLS:-$root/../shared/tools/real-vllm}
venv=${REAL_VLLM_VENV:-$HOME/.cache/real-vllm/venv}
world=${WORLD_DIR:-$HOME/.cache/draft-studio/world}
port=${1:?usage: serve-world.sh PORT [draft] [extra flags...]}; shift
[ -f "$world/target/config.json" ] || { echo "no world in $world: run scripts/world/make-world.sh" >&2; exit 1; }
[ -x "$venv/bin/vllm" ] || { echo "no real vLLM in $venv: run $tools/setup.sh" >&2; exit 1; }
flags=(--enable-auto-tool-choice --tool-call-parser hermes)
if [ "${1:-}" = draft ]; then
  shift
  draft=${DRAFT_DIR:-$world/draft}
  flags+=(--speculative-config "{\"method\":\"draft_model\",\"model\":\"$draft\",\"num_speculative_tokens\":${SPEC_TOKENS:-3}}"
          --per-request-spec-decode-metrics "${SPEC_METRICS:-detailed}")
fi
exec bash "$tools/serve.sh" "$venv" "$world/target" "$port" "${flags[@]}" "$@"
