#!/usr/bin/env bash
# Builds and starts Draft Studio on http://127.0.0.1:3000 (DS_BIND to change), bringing up what it
# needs: missing tools, PostgreSQL, the database and its migrations, and on first start the
# first admin account.
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

say "building ($profile)"
SQLX_OFFLINE=true cargo leptos build "${build_flags[@]}"
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

say "starting Draft Studio at http://${DS_BIND:-127.0.0.1:3000}"
exec "$BIN" serve
