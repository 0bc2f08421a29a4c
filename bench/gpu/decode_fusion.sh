#!/usr/bin/env bash
# Issue 16 item 3 on the device, from the repository root with .gpu/ carried; logs to $OUT.
#   decode_fusion.sh tests   the fused one-token GEMVs against the kernels they replace, bit
#                            for bit (tests/decode_fusion.rs), and the kernel tests
#   decode_fusion.sh bench   batch-1 decode at each FERRITE_DECODE_FUSION level of one build
#                            (0 nothing fused, 1 the residual adds, 2 also the MLP's norm and
#                            activation, 3 also the attention's norm, RoPE and K/V write), the
#                            levels interleaved case by case for ROUNDS rounds (default 2);
#                            with BEFORE=path/to/offline_bench, that build too (the code before
#                            the change) as level "before"
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ferrite-gpu-out}
mkdir -p "$OUT"
G=.gpu
PHASE=${1:-bench}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv
if [ "$PHASE" = tests ]; then
  for t in decode_fusion kernels; do
    timeout 120 "$G/tests/$t" --test-threads=1 --nocapture >"$OUT/test-$t.log" 2>&1
    echo "test $t rc=$? | $(grep 'test result' "$OUT/test-$t.log")"
    grep -E "same bits|panicked|differ" "$OUT/test-$t.log" | head -20
  done
  exit 0
fi
CASES=(${CASES:-qwen2.5-1.5b,1,128,512 llama-3.1-8b,1,128,256})
run() {  # round, label, binary, level, case
  local log
  log="$OUT/fusion-$1-$2-$(echo "$5" | tr ',/' '_-').log"
  # shellcheck disable=SC2046
  FERRITE_DECODE_FUSION=$4 timeout 120 "$3" $(echo "$5" | tr ',' ' ') >"$log" 2>&1
  echo "round $1 | $2 | $5 | rc=$? | $(grep RESULT "$log" | sed 's/^RESULT //' | paste -sd' ')"
}
for round in $(seq 1 "${ROUNDS:-2}"); do
  for case in "${CASES[@]}"; do
    [ -n "${BEFORE:-}" ] && run "$round" before "$BEFORE" 3 "$case"
    for level in 0 1 2 3; do run "$round" "level$level" "$G/offline_bench" "$level" "$case"; done
  done
done
