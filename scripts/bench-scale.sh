#!/usr/bin/env bash
# The scale benchmark (issue 38): the seed's run at its real size (25,000 prompts through import,
# an adaptive run on two simulators with a SIGKILL of the app, a 60 s outage of one server and a
# PostgreSQL restart along the way, the review list, a bulk approval and two exports), then the
# review benchmark's counts at 1,000,000 samples. Not part of CI: about an hour. It restarts
# the PostgreSQL cluster once, so run it where nothing else needs that server meanwhile.
#   usage: scripts/bench-scale.sh [--release]
# Without --release it measures the build `scripts/run.sh` makes (the dev profile); with it, the
# optimised one. BENCH_PROMPTS, BENCH_TIME_SCALE, BENCH_FIXED, BENCH_BASELINE=0, BENCH_FAULTS=0
# and REVIEW_BENCH_SAMPLES (0 skips the million-sample counts) change the sizes (see
# server/benches/scale/main.rs).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_postgres
export DATABASE_URL=$PG_SERVER_URL/postgres SQLX_OFFLINE=true
profile=(--profile dev)
# `cargo bench` takes no `--release`; `--profile release` names the same optimised build.
[ "${1:-}" = "--release" ] && profile=(--profile release)
# A deployed PostgreSQL vacuums by itself; this machine's CI configuration turns autovacuum off,
# and then every old copy of a sample stays in the table (207,000 dead rows after a 25,000-sample
# run) and the pages measure the bloat. So the benchmark runs with it on, as a team's server
# would, and leaves the setting as it found it (the app warns at start when it is off).
if [ "$(psql "$PG_SERVER_URL/postgres" -Atc "SHOW autovacuum")" = off ]; then
  say "turning autovacuum on for the benchmark (ALTER SYSTEM; reset at the end)"
  psql "$PG_SERVER_URL/postgres" -qc "ALTER SYSTEM SET autovacuum = on" -c "SELECT pg_reload_conf()" >/dev/null
  trap 'psql "$PG_SERVER_URL/postgres" -qc "ALTER SYSTEM RESET autovacuum" -c "SELECT pg_reload_conf()" >/dev/null' EXIT
fi
say "building the app, the simulator and the benchmark (${profile[*]})"
cargo build --locked "${profile[@]}" -p server --bin draft-studio -p vllm-sim --bin vllm-sim
cargo bench --locked "${profile[@]}" -p server --bench scale --no-run
cargo bench --locked "${profile[@]}" -p server --bench scale
million=${REVIEW_BENCH_SAMPLES:-1000000}
if [ "$million" != 0 ]; then
  say "the review list and its counts at $million samples"
  REVIEW_BENCH_SAMPLES=$million cargo bench --locked "${profile[@]}" -p engine --bench review
fi
