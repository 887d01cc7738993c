#!/usr/bin/env bash
# Runs the engine once against the real vLLM server from ../shared/tools/real-vllm (CPU, tiny
# random-weight model), beside a plain fixed-concurrency client. Not part of CI: it installs
# about 7 GB once and takes several minutes.
#   usage: scripts/real-vllm-check.sh [PROMPTS]
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
tools=$ROOT/../shared/tools/real-vllm
[ -x "$tools/setup.sh" ] || die "expected the real-vLLM tools in $tools"
ensure_postgres
venv=$HOME/.cache/real-vllm/venv model=$HOME/.cache/real-vllm/tiny-model port=${REAL_VLLM_PORT:-8011}
bash "$tools/setup.sh" "$venv" "$model"
say "starting vLLM on 127.0.0.1:$port"
pid=$(bash "$tools/serve.sh" "$venv" "$model" "$port")
trap 'kill -- -$pid 2>/dev/null || kill $pid 2>/dev/null' EXIT
DATABASE_URL=$PG_SERVER_URL/postgres SQLX_OFFLINE=true \
  cargo run --locked -p engine --features test-support --example real_vllm -- \
  "http://127.0.0.1:$port" tiny "${1:-200}"
