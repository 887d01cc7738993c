#!/usr/bin/env bash
# The generation benchmark against its three servers: the real vLLM server of
# ../shared/tools/real-vllm (installed once, about 7 GB, then served on REAL_VLLM_PORT) and two
# simulator profiles. Not part of CI: it takes about an hour. Extra arguments are passed to
# cargo bench; BENCH_* variables choose servers and rounds (see engine/benches/generation).
#   usage: scripts/bench-generation.sh
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_postgres
export DATABASE_URL=$PG_SERVER_URL/postgres SQLX_OFFLINE=true
if [[ ",${BENCH_SERVERS:-real,seed,flat}," == *,real,* ]]; then
  tools=$ROOT/../shared/tools/real-vllm
  [ -x "$tools/setup.sh" ] || die "expected the real-vLLM tools in $tools"
  venv=$HOME/.cache/real-vllm/venv model=$HOME/.cache/real-vllm/tiny-model port=${REAL_VLLM_PORT:-8011}
  say "installing the real vLLM server (once, about 7 GB)"
  bash "$tools/setup.sh" "$venv" "$model" >/dev/null
  say "starting vLLM on 127.0.0.1:$port"
  pid=$(bash "$tools/serve.sh" "$venv" "$model" "$port")
  trap 'kill -- -$pid 2>/dev/null || kill $pid 2>/dev/null' EXIT
  export BENCH_REAL_VLLM_URL=http://127.0.0.1:$port BENCH_PLAIN_PYTHON=$venv/bin/python
fi
# The dev profile already optimises dependencies and the simulator (Cargo.toml); the project's own
# crates get opt-level 3 here, so the benchmark reuses the test build's dependencies instead of
# compiling a release build of everything.
opt=(--config profile.dev.package.engine.opt-level=3 --config profile.dev.package.domain.opt-level=3)
say "building the simulator and the benchmark"
# Built with the server, as `cargo xtask build` does, so the dependencies are the ones already built.
cargo build --locked -p server --bin draft-studio -p vllm-sim --bin vllm-sim
cargo bench --locked --profile dev "${opt[@]}" -p engine --bench generation "$@"
if [ -n "${REAL_VLLM_EXPORT_PROMPTS:-}" ] && [ -n "${BENCH_REAL_VLLM_URL:-}" ]; then
  say "checking a pre-tokenized export against the server's own token ids"
  REAL_VLLM_URL=$BENCH_REAL_VLLM_URL REAL_VLLM_MODEL_DIR=$model \
    cargo run --locked "${opt[@]}" -p engine --example real_vllm_export -- "$REAL_VLLM_EXPORT_PROMPTS"
fi
