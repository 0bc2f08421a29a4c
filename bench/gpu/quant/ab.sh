#!/usr/bin/env bash
# A/B of two offline_bench builds (a kernel change against the code before it) on random
# Q4_K_M weights of real shapes, on the H200: batch-1 decode of the 1.5B and 8B shapes, and
# batch 4 of the 8B, the two builds alternated in two rounds so that drift hits both alike.
#   bash bench/gpu/quant/ab.sh OLD_OFFLINE_BENCH NEW_OFFLINE_BENCH
# Logs under $OUT; one line per run: round, build, shape, then offline_bench's RESULT line.
set -u
cd "$(dirname "$0")/../../.."
OLD=$1 NEW=$2
OUT=${OUT:-/tmp/ferrite-ab-out}
mkdir -p "$OUT"
run() {  # round, label, binary, args...
  local round=$1 label=$2 bin=$3; shift 3
  local log="$OUT/ab-$label-$round-$1-$2.log"
  timeout 180 env FERRITE_BENCH_QUANT=q4_k_m "$bin" "$@" >"$log" 2>&1
  echo "round $round | $label | $* | rc=$? | $(grep RESULT "$log" | head -1)"
}
for round in 1 2; do
  for args in "qwen2.5-1.5b 1 128 512" "llama-3.1-8b 1 128 256" "llama-3.1-8b 4 128 256"; do
    # shellcheck disable=SC2086
    run "$round" old "$OLD" $args
    # shellcheck disable=SC2086
    run "$round" new "$NEW" $args
  done
done
