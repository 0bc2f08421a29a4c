#!/usr/bin/env bash
# Call D2: the tensor-core GEMV past k = 16,384, 128-row dequantized slabs, and the wide
# quantized products with x staged per 128 rows. llama.cpp (llama-bench only) builds and the
# 27B file is written in the background; meanwhile the tests and an A/B of offline_bench
# (old = 7b84862's, new = this change); then speed:27b with the new ferrite vs llama-bench.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
el() { echo "elapsed $(( $(date +%s) - t0 )) s"; }
tar -xJf .gpu-pack/new.tar.xz
mkdir -p /root/w && cp .gpu2/ferrite /root/w/ferrite
(NO_SERVER=1 bash bench/gpu/vs_llamacpp.sh files:27b >"$OUT/files27b.log" 2>&1; echo "files rc=$?" >>"$OUT/files27b.log") &
bg=$!
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
for t in quant_kernels batch_invariance; do
  echo "== $t"; timeout 120 .gpu2/$t --test-threads=1 >"$OUT/$t.log" 2>&1; echo "rc=$?"
  grep -E "test result|panicked" "$OUT/$t.log" | head -6
done
echo "== moe (quantized stacks: eager first)"; timeout 60 .gpu2/moe --test-threads=1 quantized --nocapture >"$OUT/moe.log" 2>&1; echo "rc=$?"
grep -E "test result|panicked|eager=|experts |worst of" "$OUT/moe.log" | head -16
el
export FERRITE_BENCH_QUANT=q4_k_m
S=bench/gpu/hybrid/qwen3.5-27b.json
for args in "1 128 256" "64 128 128" "1 4096 1"; do
  for bin in old new; do
    echo "== $bin $args"; timeout 100 .gpu2/offline_bench_$bin $S $args 2>>"$OUT/bench.err" | grep RESULT
  done
  el
done
wait $bg; tail -3 "$OUT/files27b.log"
el
bash bench/gpu/vs_llamacpp.sh speed:27b 2>&1 | tail -14
el
