#!/usr/bin/env bash
# Checks tool calling and span counts against the real vLLM server of ../shared/tools/real-vllm
# (not part of CI; installs about 7 GB once). Makes a copy of its tiny model that can call tools
# (scripts/make-tool-model.py: the Hermes markers and the published Qwen3 template), serves it
# with the hermes tool parser, and runs engine/examples/real_vllm_tools.rs, which fails unless
# every tool sample ends in whole calls, every exported row equals the server's own ids, and
# every sample with reasoning text has reasoning tokens counted.
#   usage: scripts/real-vllm-tools.sh [PROMPTS]    (default 24; about 10 minutes on 2 cores)
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_postgres
ensure_real_vllm_tools_model
real=$REAL_VLLM venv=$VLLM_VENV tools_model=$TOOLS_MODEL
port=${REAL_VLLM_PORT:-8013}
pid=$(bash "$real/serve.sh" "$venv" "$tools_model" "$port" --enable-auto-tool-choice --tool-call-parser hermes)
trap 'kill -- -$pid 2>/dev/null || kill $pid 2>/dev/null || true' EXIT
SQLX_OFFLINE=true REAL_VLLM_URL=http://127.0.0.1:$port REAL_VLLM_MODEL_DIR=$tools_model DATABASE_URL=$PG_SERVER_URL/postgres \
  cargo run -p engine --example real_vllm_tools -- "${1:-24}"
