#!/usr/bin/env bash
# The loop benchmark (issue 47, item 4; not in CI): on the world of scripts/world and the real vLLM CPU
# server, through Draft Studio's own API, for each seed: a draft trained on a random N of the target's
# answers against one trained on a set curated toward the first one's weakest categories, both from the
# same start for the same budget, evaluated on the same held-out prompts; and a draft trained on
# everything, the reference. Prints each draft's loop as the product shows it (`acceptance loop`) and
# curated − random per seed; writes OUT/loop-report.json. docs/benchmarks.md has a run's figures.
# Uses its own database (draft_studio_loop, recreated) and app on 127.0.0.1:3140.
#   usage: scripts/bench-loop.sh [OUT] [bench_loop.py flags: --seeds 1,2,3 --n 60 --pool 60 --held-out 20 --weakest 0.5 ...]
#   (about an hour on 2 cores; builds the world first when missing, about 10 minutes more)
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
out=${1:-/tmp/draft-studio-loop}; shift || true
out=$(mkdir -p "$out" && cd "$out" && pwd)
# A run starts from nothing: its database is recreated, so its folders are too.
rm -rf "$out/data" "$out/datasets" "$out/exports" "$out/drafts" "$out/loop-report.json"
ensure_postgres
bash scripts/world/make-world.sh
build_site
BIN=$CARGO_TARGET_DIR/debug/draft-studio
db=draft_studio_loop
psql "$PG_SERVER_URL/postgres" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
export DATABASE_URL=$PG_SERVER_URL/$db DS_DATA_DIR=$out/data DS_BIND=127.0.0.1:3140 DS_SITE_ROOT=$CARGO_TARGET_DIR/site \
  DS_DATASET_ROOTS=$out/datasets DS_EXPORT_ROOTS=$out/exports DS_BIN=$BIN
mkdir -p "$DS_DATA_DIR" "$out/datasets" "$out/exports"
"$BIN" migrate >/dev/null
"$BIN" user add admin --role admin --generate-password >/dev/null
token=$("$BIN" token create admin --name bench-loop)
"$BIN" serve > "$out/app.log" 2>&1 &
app=$!
trap 'kill $app 2>/dev/null || true' EXIT
for _ in $(seq 60); do curl -sf http://127.0.0.1:3140/healthz >/dev/null && break; sleep 1; done
"${REAL_VLLM_VENV:-$HOME/.cache/real-vllm/venv}/bin/python" scripts/world/bench_loop.py \
  --url http://127.0.0.1:3140 --token "$token" --out "$out" "$@" 2>&1 | tee "$out/bench-loop.log"
