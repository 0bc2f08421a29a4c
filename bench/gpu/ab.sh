#!/usr/bin/env bash
# A/B of two offline_bench builds (a change against the code before it) on random bf16
# weights of real shapes, on the device, each case run by the old build then the new one so
# that drift hits both alike:
#   bash bench/gpu/ab.sh OLD_OFFLINE_BENCH NEW_OFFLINE_BENCH [CASE ...]
# A case is offline_bench's arguments with commas for spaces ("qwen2.5-1.5b,1,4096,1");
# without cases: batch-1 decode and a 4,096-token prefill of the 1.5B and 8B shapes, 256 x
# (512 in, 128 out) of both, and batch-1 decode of the Qwen3-30B-A3B shape (bench/gpu/moe).
# ROUNDS (default 1) repeats the whole list. Logs under $OUT; one line per run: round, build,
# case, rc, then offline_bench's RESULT lines (a one-request run prints the warm prefill too).
set -u
cd "$(dirname "$0")/../.."
OLD=$1 NEW=$2
shift 2
OUT=${OUT:-/tmp/ferrite-ab-out}
mkdir -p "$OUT"
CASES=("$@")
[ ${#CASES[@]} -gt 0 ] || CASES=(
  qwen2.5-1.5b,1,128,512 llama-3.1-8b,1,128,256
  qwen2.5-1.5b,1,4096,1 llama-3.1-8b,1,4096,1
  qwen2.5-1.5b,256,512,128 llama-3.1-8b,256,512,128
  bench/gpu/moe/qwen3-30b-a3b.json,1,128,128
)
run() {  # round, label, binary, case
  local round=$1 label=$2 bin=$3 case=$4
  local log
  log="$OUT/ab-$round-$label-$(echo "$case" | tr ',/' '_-').log"
  # shellcheck disable=SC2046
  timeout 240 "$bin" $(echo "$case" | tr ',' ' ') >"$log" 2>&1
  local rc=$?
  echo "round $round | $label | $case | rc=$rc | $(grep RESULT "$log" | sed 's/^RESULT //' | paste -sd' ')"
}
for round in $(seq 1 "${ROUNDS:-1}"); do
  for case in "${CASES[@]}"; do
    run "$round" old "$OLD" "$case"
    run "$round" new "$NEW" "$case"
  done
done
