#!/usr/bin/env bash
# Checks the engine against the real vLLM server of ../shared/tools/real-vllm (CPU, tiny
# random-weight model, reasoning parser) beside a sweep of the plain Python client, and fails
# unless the targets hold: adaptive concurrency at least 0.98× the best fixed limit of the
# sweep, fixed 64 at least the plain client at 64, nothing lost. Not part of CI: it installs
# about 7 GB once and takes about 20 minutes.
#   usage: scripts/real-vllm-check.sh [PROMPTS]
export BENCH_SERVERS=real BENCH_CHECK=1 BENCH_COST=0 BENCH_REAL_PROMPTS=${1:-${BENCH_REAL_PROMPTS:-512}}
exec bash "$(dirname "$0")/bench-generation.sh"
