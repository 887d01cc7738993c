#!/usr/bin/env bash
# Real structure through the whole product (issue 47, item 5; not part of CI): on the world of
# scripts/world (a target trained here that reasons, answers or calls tools on its own), served by the
# real vLLM CPU server twice: with the hermes tool parser, and without one. Runs
# engine/examples/real_vllm_world.rs, which fails unless tool_choice auto's calls (several per answer
# among them) are assembled, stored and exported token-exact; regenerated calls with other arguments
# than the source's, and calls left unanswered before a user turn, are flagged; span counts from the
# ids add up on every finished sample; the review list and the bias view order and band by reasoning
# tokens; and a run with tools is refused before it starts on the server without a parser.
#   usage: scripts/real-vllm-world.sh [PROMPTS_PER_CATEGORY]   (default 12; about 15 minutes on 2 cores,
#          plus the world's 10 the first time)
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_postgres
bash scripts/world/make-world.sh
world=${WORLD_DIR:-$HOME/.cache/draft-studio/world}
venv=${REAL_VLLM_VENV:-$HOME/.cache/real-vllm/venv}
port=${REAL_VLLM_PORT:-8046} plain_port=$(( ${REAL_VLLM_PORT:-8046} + 1 ))
pid=$(bash scripts/world/serve-world.sh "$port")
trap 'kill -- -$pid 2>/dev/null || true' EXIT
plain=$(bash "$ROOT/../shared/tools/real-vllm/serve.sh" "$venv" "$world/target" "$plain_port")
trap 'kill -- -$pid 2>/dev/null || true; kill -- -$plain 2>/dev/null || true' EXIT
SQLX_OFFLINE=true REAL_VLLM_URL=http://127.0.0.1:$port REAL_VLLM_PLAIN_URL=http://127.0.0.1:$plain_port \
  REAL_VLLM_MODEL_DIR=$world/target DATABASE_URL=$PG_SERVER_URL/postgres \
  cargo run -p engine --example real_vllm_world -- "${1:-12}"
