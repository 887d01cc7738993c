# Shared by scripts/run.sh and scripts/test.sh: install missing tools, find or start PostgreSQL.
# Everything here is idempotent, so warm runs skip straight past it.

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Builds are cached outside the clone, so a fresh clone (as in CI) still compiles incrementally.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/draft-studio/target}

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

ensure_rust_tools() {
  if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
    say "adding the wasm32-unknown-unknown target (under a minute, once)"
    rustup target add wasm32-unknown-unknown \
      || die "rustup could not add the wasm32 target; check that static.rust-lang.org is reachable"
  fi
  # `cargo xtask build` runs the wasm-bindgen on PATH; it must match Cargo.lock exactly.
  local want have
  want=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/,""); print; exit}' "$ROOT/Cargo.lock")
  have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
  if [ "$have" != "$want" ]; then
    say "installing wasm-bindgen-cli $want to match Cargo.lock (about 3 minutes on 2 cores, once)"
    cargo install wasm-bindgen-cli --version "$want" \
      || die "cargo could not install wasm-bindgen-cli $want; the browser bundle needs it (is crates.io reachable?)"
  fi
}

# Builds the server binary and the site (wasm bundle, stylesheet, assets) with the workspace's
# own tooling: see xtask/src/site.rs. Arguments go to `cargo xtask build` (`--release`).
build_site() {
  SQLX_OFFLINE=true cargo xtask build "$@"
}

ensure_browser_tools() {
  if [ ! -x /usr/bin/chromium ]; then
    say "installing Chromium for the browser tests"
    as_root apt-get install -y chromium >/dev/null 2>&1 \
      || { as_root apt-get update >/dev/null && as_root apt-get install -y chromium >/dev/null; }
  fi
  local stamp="$ROOT/end2end/node_modules/.package-lock.json"
  if [ ! -f "$stamp" ] || [ "$ROOT/end2end/package-lock.json" -nt "$stamp" ]; then
    say "installing the Playwright test runner (npm)"
    (cd "$ROOT/end2end" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund >/dev/null)
  fi
}

# The export tests upload to a real S3-compatible server: moto's, from PyPI.
ensure_s3_server() {
  if ! command -v moto_server >/dev/null 2>&1; then
    say "installing moto_server (S3-compatible server for the export tests)"
    python3 -m pip install --quiet 'moto[server]' >/dev/null \
      || die "pip could not install moto[server]; the export tests need moto_server"
  fi
  # The API's Python example (docs/api.md) runs in server/tests/cli.rs with plain `requests`.
  python3 -c 'import requests' 2>/dev/null || python3 -m pip install --quiet requests >/dev/null \
    || die "pip could not install requests; the API example test needs it"
}

# The template parity test (engine/tests/template_parity.rs) checks our chat-template renders
# against Hugging Face transformers, in a venv of its own with these exact versions (PyPI).
PARITY_VENV=$HOME/.cache/draft-studio/parity-venv
PARITY_PACKAGES=(transformers==5.24.0 jinja2==3.1.6 tokenizers==0.23.3)
# Sets PARITY_PYTHON to the venv's interpreter, creating or re-pinning the venv when needed.
ensure_parity_python() {
  PARITY_PYTHON=$PARITY_VENV/bin/python
  local stamp=$PARITY_VENV/.pinned
  if [ ! -x "$PARITY_PYTHON" ] || [ "$(cat "$stamp" 2>/dev/null)" != "${PARITY_PACKAGES[*]}" ]; then
    say "installing ${PARITY_PACKAGES[*]} for the template parity test (once)"
    python3 -m venv "$PARITY_VENV" \
      || die "python3 -m venv failed; the template parity test needs a Python 3 venv"
    "$PARITY_PYTHON" -m pip install --quiet "${PARITY_PACKAGES[@]}" >/dev/null \
      || die "pip could not install ${PARITY_PACKAGES[*]}; the template parity test needs them"
    echo "${PARITY_PACKAGES[*]}" > "$stamp"
  fi
}

pg_answers() { pg_isready -q -d "$1" 2>/dev/null; }

# Sets PG_SERVER_URL to a PostgreSQL server URL without a database name: DATABASE_URL's server
# when set; else the one on 127.0.0.1:5432 (started through the system's cluster tools if they
# exist and it is down); else a project-local cluster under .data/pg on port 5433.
ensure_postgres() {
  if [ -n "${DATABASE_URL:-}" ]; then
    PG_SERVER_URL=${DATABASE_URL%/*}
    pg_answers "$DATABASE_URL" || pg_answers "$PG_SERVER_URL/postgres" \
      || die "DATABASE_URL is set but PostgreSQL does not answer there: $DATABASE_URL"
    return
  fi
  local system=postgres://postgres@127.0.0.1:5432
  if ! pg_answers "$system/postgres" && command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
    say "starting the system PostgreSQL cluster"
    as_root pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start >/dev/null 2>&1 || true
    for _ in $(seq 1 20); do pg_answers "$system/postgres" && break; sleep 0.5; done
  fi
  if pg_answers "$system/postgres"; then
    PG_SERVER_URL=$system
    return
  fi
  start_local_cluster
}

start_local_cluster() {
  local bin data="$ROOT/.data/pg" port=5433
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
  [ -x "$bin/initdb" ] || die "no PostgreSQL found: set DATABASE_URL, run one on 127.0.0.1:5432, or install the postgresql package"
  local run=()
  if [ "$(id -u)" = 0 ]; then run=(runuser -u postgres --); fi
  if [ ! -f "$data/PG_VERSION" ]; then
    say "creating a project-local PostgreSQL cluster in .data/pg"
    mkdir -p "$data"
    [ "$(id -u)" = 0 ] && chown postgres "$data"
    "${run[@]}" "$bin/initdb" -D "$data" -U postgres --auth=trust >/dev/null
  fi
  if ! pg_answers "postgres://postgres@127.0.0.1:$port/postgres"; then
    say "starting the project-local PostgreSQL on 127.0.0.1:$port"
    "${run[@]}" "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w \
      -o "-p $port -k $data -c listen_addresses=127.0.0.1" start >/dev/null
  fi
  PG_SERVER_URL=postgres://postgres@127.0.0.1:$port
}

# The cores of this machine outside a core list such as `1` or `2-7,9`, as a comma list.
other_cpus() {
  local taken=() part i out=()
  IFS=, read -ra parts <<< "$1"
  for part in "${parts[@]}"; do
    [[ $part =~ ^[0-9]+(-[0-9]+)?$ ]] || die "not a core list: $1 (write it like 1 or 2-7,9)"
    for ((i = ${part%-*}; i <= ${part#*-}; i++)); do taken[i]=1; done
  done
  for ((i = 0; i < $(nproc); i++)); do [ -n "${taken[i]:-}" ] || out+=("$i"); done
  (IFS=,; echo "${out[*]}")
}

# Moves the PostgreSQL server at PG_SERVER_URL (its postmaster and every process it has started;
# later backends inherit) onto a core list; `unpin_postgres` gives it every core back.
pin_postgres() {
  local dir
  dir=$(psql -tA "$PG_SERVER_URL/postgres" -c "SHOW data_directory") \
    || die "could not ask PostgreSQL for its data directory"
  PG_POSTMASTER=$(head -n1 "$dir/postmaster.pid" 2>/dev/null) \
    || die "cannot read $dir/postmaster.pid to pin PostgreSQL (run as its owner or root)"
  for p in "$PG_POSTMASTER" $(pgrep -P "$PG_POSTMASTER"); do as_root taskset -a -p -c "$1" "$p" >/dev/null; done
}
unpin_postgres() {
  [ -n "${PG_POSTMASTER:-}" ] || return 0
  for p in "$PG_POSTMASTER" $(pgrep -P "$PG_POSTMASTER"); do
    as_root taskset -a -p -c "0-$(( $(nproc) - 1 ))" "$p" >/dev/null || true
  done
}

# The real vLLM server of ../shared/tools/real-vllm (installed once, about 7 GB) and its tiny model
# with the Hermes tool markers (scripts/make-tool-model.py), for the real-vLLM checks (not CI).
# Sets REAL_VLLM (the tool's folder), VLLM_VENV, TINY_MODEL and TOOLS_MODEL.
ensure_real_vllm_tools_model() {
  REAL_VLLM=$ROOT/../shared/tools/real-vllm
  VLLM_VENV=${REAL_VLLM_VENV:-$HOME/.cache/real-vllm/venv}
  TINY_MODEL=$HOME/.cache/real-vllm/tiny-model
  TOOLS_MODEL=$HOME/.cache/real-vllm/tiny-tools-model
  bash "$REAL_VLLM/setup.sh" "$VLLM_VENV" "$TINY_MODEL" >/dev/null
  [ -f "$TOOLS_MODEL/config.json" ] || "$VLLM_VENV/bin/python" "$ROOT/scripts/make-tool-model.py" "$TINY_MODEL" "$TOOLS_MODEL"
}
