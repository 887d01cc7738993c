#!/usr/bin/env bash
# Checks the engine against the real vLLM server of ../shared/tools/real-vllm (CPU, tiny
# random-weight model, reasoning parser), not part of CI (it installs about 7 GB once and takes
# about 70 minutes on a 2-core machine: three rounds of ten clients, then four confirmation pairs
# for each target):
#  1. generation beside a sweep of the plain Python client, failing unless the targets hold:
#     adaptive concurrency at least 0.98× the best fixed limit of the sweep, fixed 64 at least the
#     plain client at 64 (each judged on the median of its confirmation pairs: its two clients
#     one after the other, which goes first alternating), nothing lost;
#  2. a pre-tokenized export from the captured ids, row by row against the server's own ids
#     (`/tokenize` of the same messages, the same request sent again at temperature 0) and our
#     render of each prompt against the server's.
# The engine's runs share one registration of the server, as a team's runs do: each starts from
# the streams' pace and the adaptive limit the last one left (BENCH_REAL_ENDPOINT=each-run
# measures the first run on a newly registered server instead).
#   usage: scripts/real-vllm-check.sh [PROMPTS]
set -e
here=$(dirname "$0")
export BENCH_SERVERS=real BENCH_CHECK=1 BENCH_COST=0 BENCH_REAL_PROMPTS=${1:-${BENCH_REAL_PROMPTS:-512}}
export BENCH_REAL_ENDPOINT=${BENCH_REAL_ENDPOINT:-kept}
export REAL_VLLM_EXPORT_PROMPTS=${REAL_VLLM_EXPORT_PROMPTS:-40}
bash "$here/bench-generation.sh"
