#!/usr/bin/env bash
# The generation benchmark against its three servers: the real vLLM server of
# ../shared/tools/real-vllm (installed once, about 7 GB, then served on REAL_VLLM_PORT) and two
# simulator profiles. Not part of CI: it takes about an hour. Extra arguments are passed to
# cargo bench; BENCH_* variables choose servers and rounds (see engine/benches/generation).
# REAL_VLLM_SERVER_CPUS (a core list such as `1` or `2-7`) serves vLLM on those cores alone and
# runs the clients, the benchmark and PostgreSQL on the others, as when the server has a host of
# its own. REAL_VLLM_MODEL_CPUS instead runs only vLLM's model worker (its OpenMP threads) on
# those cores, and vLLM's API process beside the clients, the benchmark and PostgreSQL on the
# others, as on a GPU server: the model has the GPU to itself and the API process shares the
# host's CPU. Unset, everything shares every core and each client's own CPU comes out of the
# server's generation rate.
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
  pin_server=()
  server_cpus=${REAL_VLLM_SERVER_CPUS:-} model_cpus=${REAL_VLLM_MODEL_CPUS:-}
  [ -z "$server_cpus" ] || [ -z "$model_cpus" ] \
    || die "set REAL_VLLM_SERVER_CPUS (the whole server) or REAL_VLLM_MODEL_CPUS (its model worker), not both"
  own=${server_cpus:-$model_cpus}
  if [ -n "$own" ]; then
    client_cpus=$(other_cpus "$own")
    [ -n "$client_cpus" ] || die "cores $own leave none for the clients and PostgreSQL"
    # vLLM binds its OpenMP threads (the model worker) itself; every other thread of the server
    # keeps the affinity it starts with: the server's own cores, or the clients' when only the
    # model worker has cores of its own.
    export VLLM_CPU_OMP_THREADS_BIND=$own
    pin_server=(taskset -c "${server_cpus:-$client_cpus}")
    pin_postgres "$client_cpus"
  fi
  where=${server_cpus:+ (cores $server_cpus; clients and PostgreSQL on $client_cpus)}
  where=${where:-${model_cpus:+ (model worker on cores $model_cpus; its API process, clients and PostgreSQL on $client_cpus)}}
  say "starting vLLM on 127.0.0.1:$port$where"
  pid=$("${pin_server[@]}" bash "$tools/serve.sh" "$venv" "$model" "$port")
  trap 'kill -- -$pid 2>/dev/null || kill $pid 2>/dev/null; unpin_postgres' EXIT
  export BENCH_REAL_VLLM_URL=http://127.0.0.1:$port BENCH_PLAIN_PYTHON=$venv/bin/python
fi
# The dev profile already optimises dependencies and the simulator (Cargo.toml); the project's own
# crates get opt-level 3 here, so the benchmark reuses the test build's dependencies instead of
# compiling a release build of everything.
opt=(--config profile.dev.package.engine.opt-level=3 --config profile.dev.package.domain.opt-level=3)
say "building the simulator and the benchmark"
# Built with the server, as `cargo xtask build` does, so the dependencies are the ones already built.
cargo build --locked -p server --bin draft-studio -p vllm-sim --bin vllm-sim
cargo bench --locked --profile dev "${opt[@]}" -p engine --bench generation --no-run
pin_clients=()
[ -n "${client_cpus:-}" ] && pin_clients=(taskset -c "$client_cpus")
"${pin_clients[@]}" cargo bench --locked --profile dev "${opt[@]}" -p engine --bench generation "$@"
if [ -n "${REAL_VLLM_EXPORT_PROMPTS:-}" ] && [ -n "${BENCH_REAL_VLLM_URL:-}" ]; then
  say "checking a pre-tokenized export against the server's own token ids"
  REAL_VLLM_URL=$BENCH_REAL_VLLM_URL REAL_VLLM_MODEL_DIR=$model \
    cargo run --locked "${opt[@]}" -p engine --example real_vllm_export -- "$REAL_VLLM_EXPORT_PROMPTS"
fi
