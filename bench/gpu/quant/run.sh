#!/usr/bin/env bash
# Issue 15 on the H200: quantized GGUF weights kept quantized on the device. Runs from the
# repository root with .gpu/ (bench/gpu/build.sh) unpacked: the quantized-kernel tests and the
# CPU/CUDA parity tests (every format alone and a Q4_K_M-like mix), then offline_bench on random
# Q4_K_M weights of the Qwen2.5-1.5B and Llama-3.1-8B shapes, each beside the same shape in
# bf16 and beside the old path that widened the file to bf16 at load
# (FERRITE_CUDA_WIDEN_QUANT=1). Logs under $OUT. `run.sh fp8`: the FP8 tests and FP8
# beside bf16 at batch 1; `run.sh fp8-batch`: prefill and 256 requests; `run.sh fp8-gemm`:
# the FP8 tensor-core products' test, then prefill and 256 requests with batch invariance off.
set -u
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/ferrite-gpu-out}
mkdir -p "$OUT"
G=.gpu
declare -a ROWS
row() { ROWS+=("$1"); }

run_tests() {  # name, limit, filter...
  local name=$1 limit=$2; shift 2
  echo "== test $name $*"
  timeout "$limit" "$G/tests/$name" --test-threads=1 --nocapture "$@" >>"$OUT/test-$name.log" 2>&1
  local rc=$?
  grep -E "relative error|parity|agree|all matrices|SKIPPED|panicked|test result|FAILED" "$OUT/test-$name.log" | tail -40
  row "test $name $* | rc=$rc | $(grep -E '^test result' "$OUT/test-$name.log" | tail -1)"
}
PHASE=${1:-all}
if [ "$PHASE" = tests ] || [ "$PHASE" = all ]; then
  run_tests quant_kernels 120
  run_tests parity 240 quantized
  run_tests ferrite_cuda 30
  run_tests kernels 90 linear
fi

bench() {  # label, limit, env, args...
  local label=$1 limit=$2 envs=$3; shift 3
  echo "== bench $label: $envs offline_bench $*"
  local before; before=$(wc -l <"$OUT/bench.log" 2>/dev/null || echo 0)
  timeout "$limit" env $envs $G/offline_bench "$@" >>"$OUT/bench.log" 2>&1
  local rc=$?
  # One request also reports the warm prefill on a second RESULT line: keep both.
  local line; line=$(tail -n +"$((before + 1))" "$OUT/bench.log" | grep RESULT | sed 's/^RESULT //' | paste -sd' ')
  line="RESULT $line"
  grep -E "random .* weights|warmed|loaded|ERROR|Error|panicked" "$OUT/bench.log" | tail -3
  echo "$line"
  row "$label | rc=$rc | ${line#RESULT }"
}
if [ "$PHASE" = bench ] || [ "$PHASE" = all ]; then
  Q=FERRITE_BENCH_QUANT=q4_k_m
  bench "1.5B Q4_K_M batch-1 decode" 120 "$Q" qwen2.5-1.5b 1 128 512
  bench "1.5B bf16 batch-1 decode" 90 "X=1" qwen2.5-1.5b 1 128 512
  bench "1.5B Q4_K_M widened (old) batch-1 decode" 120 "$Q FERRITE_CUDA_WIDEN_QUANT=1" qwen2.5-1.5b 1 128 512
  bench "1.5B Q4_K_M prefill 4096" 120 "$Q" qwen2.5-1.5b 1 4096 1
  bench "8B Q4_K_M batch-1 decode" 180 "$Q" llama-3.1-8b 1 128 256
  bench "8B bf16 batch-1 decode" 120 "X=1" llama-3.1-8b 1 128 256
  bench "8B Q4_K_M prefill 4096" 180 "$Q" llama-3.1-8b 1 4096 1
  bench "8B Q4_K_M 64x(512,128)" 180 "$Q" llama-3.1-8b 64 512 128
fi
if [ "$PHASE" = fp8 ]; then
  # FP8 (ferrite_model::fp8, one scale per block of 128, random e4m3 bytes) beside bf16 of the
  # same shape: FP8-weight GEMVs for decode, dequantize + cuBLAS for prefill.
  run_tests quant_kernels 120
  run_tests parity 240 quantized_weights_each
  F=FERRITE_BENCH_QUANT=fp8
  bench "1.5B FP8 batch-1 decode" 120 "$F" qwen2.5-1.5b 1 128 512
  bench "1.5B bf16 batch-1 decode" 90 "X=1" qwen2.5-1.5b 1 128 512
  bench "8B FP8 batch-1 decode" 180 "$F" llama-3.1-8b 1 128 256
  bench "8B bf16 batch-1 decode" 120 "X=1" llama-3.1-8b 1 128 256
  bench "8B FP8 8x(128,128)" 180 "$F" llama-3.1-8b 8 128 128
  bench "8B bf16 8x(128,128)" 120 "X=1" llama-3.1-8b 8 128 128
fi
if [ "$PHASE" = fp8-batch ]; then
  F=FERRITE_BENCH_QUANT=fp8
  bench "8B FP8 prefill 4096" 180 "$F" llama-3.1-8b 1 4096 1
  bench "8B bf16 prefill 4096" 120 "X=1" llama-3.1-8b 1 4096 1
  bench "8B FP8 256x(512,128)" 240 "$F" llama-3.1-8b 256 512 128
  bench "8B bf16 256x(512,128)" 180 "X=1" llama-3.1-8b 256 512 128
fi
if [ "$PHASE" = fp8-gemm ]; then
  # FP8 tensor-core products (crate::fp8_gemm, batch invariance off) beside the dequantizing
  # path of the same binary (FERRITE_FP8_GEMM=0) and bf16, all with batch invariance off.
  run_tests fp8_gemm 240
  F="FERRITE_BENCH_QUANT=fp8 FERRITE_BENCH_BATCH_INVARIANT=0"
  B="FERRITE_BENCH_BATCH_INVARIANT=0"
  bench "8B FP8 prefill 4096, FP8 tensor cores" 180 "$F" llama-3.1-8b 1 4096 1
  bench "8B FP8 prefill 4096, dequantized" 180 "$F FERRITE_FP8_GEMM=0" llama-3.1-8b 1 4096 1
  bench "8B bf16 prefill 4096" 120 "$B" llama-3.1-8b 1 4096 1
  bench "8B FP8 256x(512,128), FP8 tensor cores" 240 "$F" llama-3.1-8b 256 512 128
  bench "8B bf16 256x(512,128)" 180 "$B" llama-3.1-8b 256 512 128
fi
if [ "$PHASE" = profile ]; then
  # Per-kernel GPU time and throughput over eager batch-1 decode steps (Nsight Compute).
  for shape in llama-3.1-8b qwen2.5-1.5b; do
    echo "== ncu $shape q4_k_m"
    timeout 150 env FERRITE_BENCH_QUANT=q4_k_m ncu --clock-control none \
      --metrics gpu__time_duration.sum \
      --print-summary per-kernel --launch-skip 1200 --launch-count 400 \
      $G/offline_bench $shape 1 16 24 eager >"$OUT/ncu-$shape.log" 2>&1
    echo "ncu rc=$?"
    grep -E "^\s+[a-z_0-9]+.*\(|gpu__time_duration|Invocations" "$OUT/ncu-$shape.log" | head -90
  done
fi
echo "== summary"
printf '%s\n' "${ROWS[@]}" | tee "$OUT/summary.txt"
