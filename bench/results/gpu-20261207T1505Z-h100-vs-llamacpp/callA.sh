#!/usr/bin/env bash
# Call A: llama.cpp builds and the 27B Q4_K_M file is written in the background (vs_llamacpp.sh
# files:27b) while the GPU, idle meanwhile, runs the moe test and the 27B profiles; then
# speed:27b. Kernel times under ncu are device times; the rates here share the CPU with the build.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
el() { echo "elapsed $(( $(date +%s) - t0 )) s"; }
(bash bench/gpu/vs_llamacpp.sh files:27b >"$OUT/files27b.log" 2>&1; echo "files rc=$?" >>"$OUT/files27b.log") &
bg=$!
tar -xJf .gpu-pack/gpu.tar.xz
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
echo "== moe"; timeout 150 .gpu/tests/moe --test-threads=1 >"$OUT/moe.log" 2>&1; echo "moe rc=$?"
grep -E "test result|FAILED|panicked" "$OUT/moe.log" | head -20
el
export FERRITE_BENCH_QUANT=q4_k_m
S=bench/gpu/hybrid/qwen3.5-27b.json
echo "== ncu prefill 27B Q4_K_M, 4096 tokens"
timeout 200 ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
  --launch-skip 3000 .gpu/offline_bench $S 1 4096 1 eager >"$OUT/ncu-prefill.csv" 2>"$OUT/ncu-prefill.err"
echo "ncu rc=$?"
python3 bench/gpu/kernel_times.py "$OUT/ncu-prefill.csv" --forward -1 | tee "$OUT/profile-prefill-27b.txt" | head -32
el
echo "== ncu decode step, 64 sequences"
timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
  --launch-skip 7000 --launch-count 2600 .gpu/offline_bench $S 64 128 40 eager \
  >"$OUT/ncu-decode64.csv" 2>"$OUT/ncu-decode64.err"
echo "ncu rc=$?"
python3 bench/gpu/kernel_times.py "$OUT/ncu-decode64.csv" --forward -2 | tee "$OUT/profile-decode64-27b.txt" | head -28
el
wait $bg; tail -4 "$OUT/files27b.log"
el
NO_SERVER= bash bench/gpu/vs_llamacpp.sh build speed:27b 2>&1 | tail -40
el
