#!/usr/bin/env bash
# Builds and starts Draft Studio on http://127.0.0.1:3000 (DS_BIND to change), bringing up what it
# needs: missing tools, PostgreSQL, the database and its migrations, on first start the first
# admin account, and demo data. With no vLLM server given (DS_VLLM_URL), it starts the bundled
# simulator on 127.0.0.1:8100 and registers it as the `demo-sim` endpoint.
#   usage: scripts/run.sh [--release]
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

profile=debug
build_flags=()
if [ "${1:-}" = "--release" ]; then profile=release; build_flags=(--release); fi

ensure_rust_tools
ensure_postgres
export DATABASE_URL=${DATABASE_URL:-$PG_SERVER_URL/draft_studio}
export DS_DATA_DIR=${DS_DATA_DIR:-$ROOT/.data}
export DS_SITE_ROOT=${DS_SITE_ROOT:-$ROOT/target/site}
mkdir -p "$DS_DATA_DIR"

build_site "${build_flags[@]}"
BIN=$CARGO_TARGET_DIR/$profile/draft-studio

say "preparing the database"
"$BIN" migrate >/dev/null

if [ "$("$BIN" user count)" = 0 ]; then
  password=$("$BIN" user add admin --role admin --generate-password | sed -n 's/^password: //p')
  printf 'username: admin\npassword: %s\n' "$password" > "$DS_DATA_DIR/first-admin.txt"
  chmod 600 "$DS_DATA_DIR/first-admin.txt"
  say "created the first admin: sign in as 'admin' with password '$password' (also in .data/first-admin.txt)"
fi

"$BIN" dataset import-demo-if-empty
sim_pids=()
if [ -z "${DS_VLLM_URL:-}" ]; then
  DS_VLLM_URL=http://127.0.0.1:8100
  if ! curl -sf "$DS_VLLM_URL/health" >/dev/null 2>&1; then
    say "no DS_VLLM_URL given: starting the vLLM simulator at $DS_VLLM_URL"
    "$CARGO_TARGET_DIR/$profile/vllm-sim" --port 8100 > "$DS_DATA_DIR/vllm-sim.log" 2>&1 &
    sim_pids+=($!)
  fi
  # A second one serving the target with a speculative-decoding draft that reports each
  # request's acceptance (weaker on coding prompts), for trying evaluations (docs/acceptance.md).
  draft_url=http://127.0.0.1:8101
  if ! curl -sf "$draft_url/health" >/dev/null 2>&1; then
    say "starting a simulator that serves a draft at $draft_url (the demo-draft endpoint)"
    "$CARGO_TARGET_DIR/$profile/vllm-sim" --port 8101 --num-speculative-tokens 3 --draft-acceptance 0.8 \
      --draft-acceptance-if-prompt-contains Python=0.45 --draft-acceptance-if-prompt-contains SQL=0.45 \
      --draft-acceptance-if-prompt-contains TypeScript=0.45 --per-request-spec-decode-metrics \
      > "$DS_DATA_DIR/vllm-sim-draft.log" 2>&1 &
    sim_pids+=($!)
  fi
  trap 'kill "${sim_pids[@]}" 2>/dev/null' EXIT
  for url in "$DS_VLLM_URL" "$draft_url"; do
    for _ in $(seq 1 40); do curl -sf "$url/health" >/dev/null 2>&1 && break; sleep 0.25; done
  done
  endpoint_name=demo-sim
else
  endpoint_name=vllm
fi
endpoints=$("$BIN" endpoint list)
if [ -z "$endpoints" ]; then
  "$BIN" endpoint add "$endpoint_name" "$DS_VLLM_URL"
fi
if [ -n "${draft_url:-}" ] && ! grep -q '^demo-draft' <<< "$endpoints"; then
  "$BIN" endpoint add demo-draft "$draft_url"
fi

say "starting Draft Studio at http://${DS_BIND:-127.0.0.1:3000}"
"$BIN" serve
