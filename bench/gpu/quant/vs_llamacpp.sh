#!/usr/bin/env bash
# Issue 15's table on the H200: llama.cpp's CUDA build and ferrite on the same random-weight GGUF
# files of real shapes (F16, then llama-quantize Q4_K_M), in one call. Carry .gpu-peer/ made by
# bench/gpu/quant/prepare_peer.sh: the trimmed llama.cpp sources of llama-cpp-python 0.3.36,
# the Qwen2.5 tokenizer as a tensor-less GGUF, the random-GGUF writer and the stripped ferrite
# binary. Work files go to /root/w, so a second call on a still-warm machine picks up where a
# first one stopped (build, files); results are appended to $OUT as each one finishes.
#   llama.cpp: llama-bench -m F -ngl 99 -fa 1 -p 4096 -n 128 -r 3
#   ferrite:   ferrite bench-model F --device cuda --prompt-len 4096 --gen-len 128 --repetitions 3
# TYPES (default "Q4_K_M F16"): the file types to run.
set -u
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/ferrite-gpu-out}
W=${WORK:-/root/w}
P=.gpu-peer
mkdir -p "$OUT" "$W"
LOG="$OUT/vs_llamacpp.log"
say() { echo "$(date -u +%H:%M:%S) $*" | tee -a "$LOG" >&2; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv | tee -a "$LOG"

if [ ! -x "$W/llama.cpp/build/bin/llama-bench" ]; then
  say "building llama.cpp (CUDA, sm_90)"
  tar -xJf "$P/llama.cpp.tar.xz" -C "$W"
  (cd "$W/llama.cpp" &&
    cmake -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF \
      -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF >"$OUT/llama-cmake.log" 2>&1 &&
    cmake --build build -j 16 --target llama-bench llama-quantize >>"$OUT/llama-cmake.log" 2>&1) ||
    { say "llama.cpp build failed"; tail -20 "$OUT/llama-cmake.log"; exit 1; }
  say "llama.cpp built"
fi
LB="$W/llama.cpp/build/bin"
[ -x "$W/ferrite" ] || { xz -dc "$P/ferrite.xz" >"$W/ferrite" && chmod +x "$W/ferrite"; }
[ -f "$W/vocab.gguf" ] || xz -dc "$P/vocab.gguf.xz" >"$W/vocab.gguf"

file_for() {  # shape, type -> path (written on first use)
  local shape=$1 type=$2 f16="$W/$1-F16.gguf" out="$W/$1-$2.gguf"
  if [ ! -f "$f16" ]; then
    say "writing $f16"
    PYTHONPATH="$W/llama.cpp/gguf-py" python3 "$P/gguf_random.py" model "$shape" "$W/vocab.gguf" "$f16.tmp" >>"$LOG" 2>&1 &&
      mv "$f16.tmp" "$f16"
  fi
  if [ "$type" != F16 ] && [ ! -f "$out" ]; then
    say "quantizing $out"
    "$LB/llama-quantize" "$f16" "$out.tmp" "$type" 16 >>"$OUT/quantize.log" 2>&1 && mv "$out.tmp" "$out"
  fi
  echo "$out"
}

# The quantized files first: they are the table's point, and a call cut short keeps them.
# TYPES="Q4_K_M" runs only those rows.
for type in ${TYPES:-Q4_K_M F16}; do
  for shape in qwen2.5-1.5b llama-3.1-8b-qv; do
    f=$(file_for "$shape" "$type")
    [ -f "$f" ] || { say "no $f"; continue; }
    say "== $shape $type: $(stat -c %s "$f") bytes"
    timeout 240 "$LB/llama-bench" -m "$f" -ngl 99 -fa 1 -p 4096 -n 128 -r 3 -o md 2>>"$OUT/llama-bench.err" | tee -a "$LOG"
    timeout 240 "$W/ferrite" bench-model "$f" --device cuda --prompt-len 4096 --gen-len 128 \
      --repetitions 3 2>>"$OUT/ferrite-bench.err" | tee -a "$LOG"
    grep -hE "weights_gib" "$OUT/ferrite-bench.err" | tail -1 | sed 's/\x1b\[[0-9;]*m//g' | tee -a "$LOG"
  done
done
say "done"
