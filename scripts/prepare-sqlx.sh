#!/usr/bin/env bash
# Regenerates the offline query cache `.sqlx/` from a freshly migrated scratch database, so
# builds with SQLX_OFFLINE=true (the test command, CI) check every query. Run it after changing
# a query or a migration, then commit `.sqlx/`.
#   usage: scripts/prepare-sqlx.sh
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_postgres
db=$PG_SERVER_URL/draft_studio_sqlx_prepare
psql -q "$PG_SERVER_URL/postgres" -c "DROP DATABASE IF EXISTS draft_studio_sqlx_prepare WITH (FORCE)" -c "CREATE DATABASE draft_studio_sqlx_prepare"
for migration in migrations/*.sql; do psql -q -v ON_ERROR_STOP=1 "$db" -f "$migration" >/dev/null; done
rm -rf .sqlx && mkdir .sqlx
# Touch the crates with queries so the macros run again and write every query.
find engine server -name '*.rs' -exec touch {} +
DATABASE_URL=$db SQLX_OFFLINE=false SQLX_OFFLINE_DIR=$ROOT/.sqlx \
  cargo check --all-targets -p domain -p engine -p server -p vllm-sim --features engine/test-support
say "$(ls .sqlx | wc -l) queries cached in .sqlx/"
