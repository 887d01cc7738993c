#!/usr/bin/env bash
# Runs every test: formatting, unit and database tests for all crates, then the browser tests
# against a freshly built app on a fresh database. Installs whatever is missing first.
#   usage: scripts/test.sh            (CI runs exactly this through .ci/run)
#          scripts/test.sh --browser [SPEC...]   only the browser tests (all, or the given specs)
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

ensure_rust_tools
ensure_browser_tools
ensure_postgres
ensure_s3_server
ensure_parity_python

# Queries are checked at compile time against .sqlx/, so builds do not depend on a live schema.
export SQLX_OFFLINE=true
# #[sqlx::test] creates one scratch database per test through this URL.
export DATABASE_URL=$PG_SERVER_URL/postgres

browser_only=false
if [ "${1:-}" = "--browser" ]; then browser_only=true; shift; fi

if ! $browser_only; then
  say "checking formatting"
  cargo fmt --all --check

  say "clippy, warnings as errors"
  cargo clippy --locked -p domain -p engine -p vllm-sim -p server -p app -p xtask --features app/ssr \
    --all-targets -- -D warnings

  say "unit, database and handler tests"
  # The template parity test renders the same conversations with transformers in this Python.
  export DS_PARITY_PYTHON=$PARITY_PYTHON
  # The app crate is tested with its server half only; building it with `hydrate` too would
  # unify features across the workspace (see leptos-anchors §5.6).
  cargo test --locked -p domain -p engine -p vllm-sim -p server -p app -p xtask --features app/ssr
fi

say "building the app and the simulator for the browser tests"
build_site

say "browser tests"
E2E_DB=$PG_SERVER_URL/draft_studio_e2e
E2E_DIR=$(mktemp -d)
psql -q "$PG_SERVER_URL/postgres" -c "DROP DATABASE IF EXISTS draft_studio_e2e WITH (FORCE)" >/dev/null
BIN=$CARGO_TARGET_DIR/debug/draft-studio
export E2E_ADMIN_USER=admin E2E_ADMIN_PASSWORD=admin-password-e2e
# The training view decodes with a tokenizer from under the export root (DS_DATA_DIR/exports).
mkdir -p "$E2E_DIR/exports/tokenizers"
cp -r engine/tests/fixtures/tokenizers/qwen "$E2E_DIR/exports/tokenizers/qwen"
export E2E_TOKENIZER_DIR=tokenizers/qwen
echo "$E2E_ADMIN_PASSWORD" | DATABASE_URL=$E2E_DB DS_DATA_DIR=$E2E_DIR "$BIN" user add "$E2E_ADMIN_USER" --role admin >/dev/null
DATABASE_URL=$E2E_DB DS_DATA_DIR=$E2E_DIR DS_BIND=127.0.0.1:3100 DS_SITE_ROOT="$ROOT/target/site" \
  "$BIN" serve > "$E2E_DIR/server.log" 2>&1 &
server_pid=$!
# A simulated vLLM server for the run pages, twice as fast as real time.
"$CARGO_TARGET_DIR/debug/vllm-sim" --port 3199 --time-scale 2 > "$E2E_DIR/sim.log" 2>&1 &
sim_pid=$!
# One serving the target with a draft that reports each request's acceptance, weak on prompts
# about MATH, for the acceptance pages; fast, so an evaluation ends in seconds.
"$CARGO_TARGET_DIR/debug/vllm-sim" --port 3198 --time-scale 20 --median-completion-tokens 60 \
  --num-speculative-tokens 3 --draft-acceptance 0.85 --draft-acceptance-if-prompt-contains MATH=0.3 \
  --per-request-spec-decode-metrics > "$E2E_DIR/draft-sim.log" 2>&1 &
draft_sim_pid=$!
trap 'kill $server_pid $sim_pid $draft_sim_pid 2>/dev/null; wait $server_pid $sim_pid $draft_sim_pid 2>/dev/null || true' EXIT
for _ in $(seq 1 60); do
  curl -sf http://127.0.0.1:3100/healthz >/dev/null && break
  kill -0 $server_pid 2>/dev/null || { cat "$E2E_DIR/server.log"; die "the app exited during start-up"; }
  sleep 0.5
done
# The run, review and export specs seed their data straight into this database.
export E2E_BASE_URL=http://127.0.0.1:3100 E2E_SIM_URL=http://127.0.0.1:3199 E2E_DRAFT_SIM_URL=http://127.0.0.1:3198
export E2E_DATABASE_URL=$E2E_DB
# On a failure the server log's tail comes first and the test report's tail last, so the end of
# a CI log names the test that failed and why.
if ! (cd end2end && npx playwright test "$@" 2>&1 | tee "$E2E_DIR/playwright.log"; exit "${PIPESTATUS[0]}"); then
  say "server log: $E2E_DIR/server.log"
  tail -n 50 "$E2E_DIR/server.log"
  say "what failed (the end of the test report, $E2E_DIR/playwright.log)"
  tail -n 60 "$E2E_DIR/playwright.log"
  exit 1
fi
say "all tests passed"
