#!/usr/bin/env bash
# Call C (warm, after callB.sh): the 35B-A3B file, llama-bench vs ferrite bench-model, then 64
# streams.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
bash bench/gpu/vs_llamacpp.sh speed:35b serve:35b 2>&1 | tail -90
echo "elapsed $(( $(date +%s) - t0 )) s"
