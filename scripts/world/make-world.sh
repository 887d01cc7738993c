#!/usr/bin/env bash
# Builds the world with structure of issue 47 (item 1) in one command: synthetic conversations in six
# categories, a tokenizer with the Hermes markers and the Qwen3 template, a 2-layer target and a weak
# 1-layer draft, and the prompt set as JSONL (scripts/world/make_world.py). Seeded and idempotent:
# a finished world with the same settings is kept (--force rebuilds). Needs the real-vLLM venv of
# ../shared/tools/real-vllm (setup.sh, once); about 10 minutes on 2 idle cores.
#   usage: scripts/world/make-world.sh [make_world.py flags: --out DIR --seed N --threads N --force ...]
#   then:  scripts/world/serve-world.sh 8040 draft   and   python3 scripts/world/check_world.py --url http://127.0.0.1:8040
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${REAL_VLLM_VENV:-$HOME/.cache/real-vllm/venv}
[ -x "$venv/bin/python" ] || { echo "no real-vLLM venv in $venv: run ../shared/tools/real-vllm/setup.sh" >&2; exit 1; }
exec "$venv/bin/python" "$here/make_world.py" "$@"
