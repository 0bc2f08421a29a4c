#!/usr/bin/env bash
# Where a decode step's time goes on the H200 (run from the repository root with .gpu/ carried):
# step rates with graphs, eagerly and with cuBLAS instead of the GEMV kernels, then Nsight
# Compute's per-kernel durations over a few eager decode steps. Logs go to $OUT.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ferrite-gpu-out}
mkdir -p "$OUT"
G=.gpu
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv
b() { timeout 90 env "$@" 2>>"$OUT/profile-bench.log" | grep RESULT; }
echo "== batch-1 decode, 1.5B: graphs / eager / cuBLAS instead of GEMV"
b $G/offline_bench qwen2.5-1.5b 1 128 256
b $G/offline_bench qwen2.5-1.5b 1 128 256 eager
b FERRITE_GEMV_MAX_TOKENS=0 $G/offline_bench qwen2.5-1.5b 1 128 256
echo "== batch-8 and batch-64 decode, 1.5B"
b $G/offline_bench qwen2.5-1.5b 8 128 128
b $G/offline_bench qwen2.5-1.5b 64 128 128
echo "== per-kernel GPU time over eager decode steps (ncu)"
timeout 240 ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
  --launch-skip 1500 --launch-count 800 $G/offline_bench qwen2.5-1.5b 1 16 40 eager \
  >"$OUT/ncu.log" 2>&1
echo "ncu rc=$?"
grep -E "^\s+[a-z_0-9]+.*\(|gpu__time_duration|Invocations|^  [A-Za-z]" "$OUT/ncu.log" | head -120
