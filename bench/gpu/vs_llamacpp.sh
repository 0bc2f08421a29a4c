#!/usr/bin/env bash
# The speed tables against llama.cpp on the device: llama.cpp's CUDA build and ferrite on the
# same random-weight GGUF file of a real model's shape. Models: 27b and 35b (issue 37: the real
# Qwen3.5-27B and Qwen3.6-35B-A3B shapes; bench/gpu/hybrid/gguf_random_hybrid.py --q4_k_m
# writes Q4_K_M in llama.cpp's qwen35 / qwen35moe layout with llama-quantize's choice of types;
# until 2026-12-07 it wrote Q8_0 and llama-quantize made Q4_K_M from it) and 20b (issue
# 38: gpt-oss-20b; bench/gpu/gpt_oss/gguf_random_gpt_oss.py writes llama.cpp's MXFP4 layout,
# used as written). Carry .gpu-peer-hybrid/ (bench/gpu/prepare_llamacpp_peer.sh: llama.cpp's
# sources -- its LLAMA_VERSION file says which -- and the stripped ferrite binary). Work files
# live in /root/w, so the stages can be split over calls on a warm machine; each stage skips what
# an earlier call finished.
# Results go to $OUT.
#   bash bench/gpu/vs_llamacpp.sh build files:27b speed:27b clean:27b files:20b ...
# Stages: build (llama-bench, llama-quantize, llama-server), files:M (M's file, written while
# llama.cpp builds when it has not yet), speed:M (llama-bench pp4096/tg128 vs ferrite bench-model),
# serve:M (64 concurrent streams of 512 in, 128 out: llama-server -np 64 vs ferrite serve,
# `ferrite bench` as the client), clean:M.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ferrite-gpu-out}
W=${WORK:-/root/w}
P=.gpu-peer-hybrid
mkdir -p "$OUT" "$W"
LOG="$OUT/vs_llamacpp.log"
say() { echo "$(date -u +%H:%M:%S) $*" | tee -a "$LOG" >&2; }
LB="$W/llama.cpp/build/bin"
FERRITE="$W/ferrite"
[ -x "$FERRITE" ] || { xz -dc "$P/ferrite.xz" >"$FERRITE" && chmod +x "$FERRITE"; }
config_of() {
  case $1 in
    27b) echo bench/gpu/hybrid/qwen3.5-27b.json ;;
    35b) echo bench/gpu/hybrid/qwen3.6-35b-a3b.json ;;
    20b) echo bench/gpu/gpt_oss/gpt-oss-20b.json ;;
  esac
}
# The file both engines run: Q4_K_M for the hybrids, gpt-oss as written (MXFP4 experts).
model_file() { case $1 in 20b) echo "$W/$1-MXFP4.gguf" ;; *) echo "$W/$1-Q4_K_M.gguf" ;; esac; }
STREAMS=${STREAMS:-64} IN=${IN:-512} GEN=${GEN:-128} REQUESTS=${REQUESTS:-128}
# llama-server splits -c among its slots. `ferrite bench`'s random prompts of IN tokens are
# counted by its own tokenizer: the fixture vocabulary these files carry turns 512 of them into
# about 1,700, so each slot gets room for that and the output.
SLOT_CTX=${SLOT_CTX:-2048}

build() {
  [ -x "$LB/llama-bench" ] && return 0
  say "building llama.cpp (CUDA, sm_90)"
  [ -d "$W/llama.cpp" ] || tar -xJf "$P/llama.cpp.tar.xz" -C "$W"
  (cd "$W/llama.cpp" &&
    cmake -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF \
      -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_WEBUI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_APP=OFF \
      -DLLAMA_USE_PREBUILT_UI=OFF >"$OUT/llama-cmake.log" 2>&1 &&
    cmake --build build -j 16 --target llama-bench llama-quantize >>"$OUT/llama-cmake.log" 2>&1) ||
    { say "llama.cpp build failed"; tail -30 "$OUT/llama-cmake.log"; return 1; }
  # llama-server apart: 0c1e57098's needs scripts/ui-assets.cmake, which packs without
  # scripts/ lack; the speed stage does not need it (NO_SERVER=1 skips it).
  [ -n "${NO_SERVER:-}" ] && return 0
  (cd "$W/llama.cpp" && cmake --build build -j 16 --target llama-server >>"$OUT/llama-cmake.log" 2>&1) ||
    say "llama-server not built (serve:M needs it)"
  say "llama.cpp built ($(cat "$W/llama.cpp/LLAMA_VERSION" 2>/dev/null || echo ec562eb))"
}

# Writes model M's random file to $2 while llama.cpp builds (the writer needs only gguf-py).
write_random() {
  local m=$1 dst=$2 extra=${3:-} writer vocab pid
  case $m in
    20b) writer=bench/gpu/gpt_oss/gguf_random_gpt_oss.py vocab=fixtures/arch/gpt_oss_mxfp4/model.gguf extra= ;;
    *) writer=bench/gpu/hybrid/gguf_random_hybrid.py vocab=fixtures/arch/qwen3_5/model.gguf ;;
  esac
  [ -d "$W/llama.cpp" ] || tar -xJf "$P/llama.cpp.tar.xz" -C "$W"
  say "writing $dst"
  (PYTHONPATH="$W/llama.cpp/gguf-py" python3 "$writer" "$(config_of "$m")" "$vocab" "$dst.tmp" $extra \
    2>>"$OUT/gguf-$m.log" && mv "$dst.tmp" "$dst") &
  pid=$!
  build
  wait "$pid"
  [ -f "$dst" ] || { say "writing $dst failed"; tail -5 "$OUT/gguf-$m.log"; return 1; }
}

files() {
  local m=$1 q4
  q4=$(model_file "$m")
  [ -f "$q4" ] && return 0
  # gpt-oss runs as written (MXFP4 experts); the hybrids' writer makes Q4_K_M directly
  # (gguf_random_hybrid.py --q4_k_m: no Q8_0 intermediate, no llama-quantize pass).
  write_random "$m" "$q4" --q4_k_m || return 1
  say "$q4: $(stat -c %s "$q4") bytes"
}

speed() {
  local m=$1 f
  f=$(model_file "$m")
  say "== speed $m: llama-bench"
  timeout 300 "$LB/llama-bench" -m "$f" -ngl 99 -fa 1 -p 4096 -n 128 -r 3 -o md \
    2>"$OUT/llama-bench-$m.err" | tee -a "$LOG"
  say "== speed $m: ferrite bench-model"
  timeout 300 "$FERRITE" bench-model "$f" --device cuda --prompt-len 4096 --gen-len 128 \
    --repetitions 3 2>"$OUT/ferrite-bench-$m.err" | tee -a "$LOG"
}

wait_healthy() {  # url, pid
  for _ in $(seq 1 240); do
    python3 -c "import urllib.request, sys; urllib.request.urlopen(sys.argv[1], timeout=2)" \
      "$1/health" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 1
  done
  return 1
}

serve_one() {  # engine, model
  local engine=$1 m=$2 f port pid
  f=$(model_file "$m")
  if [ "$engine" = ferrite ]; then
    port=8101
    "$FERRITE" serve "$f" --device cuda --port "$port" --max-num-seqs "$STREAMS" \
      >"$OUT/serve-ferrite-$m.log" 2>&1 &
  else
    port=8102
    "$LB/llama-server" -m "$f" -ngl 99 -fa on -np "$STREAMS" -c $((STREAMS * SLOT_CTX)) \
      --cont-batching --port "$port" >"$OUT/serve-llama-$m.log" 2>&1 &
  fi
  pid=$!
  if wait_healthy "http://127.0.0.1:$port" "$pid"; then
    say "== serve $m: $engine up, $STREAMS streams of ($IN in, $GEN out), $REQUESTS requests"
    timeout 400 "$FERRITE" bench --url "http://127.0.0.1:$port" --workload random \
      --input-len "$IN" --output-len "$GEN" --max-concurrency "$STREAMS" \
      --num-requests "$REQUESTS" --seed 7 --no-progress --max-duration 360 \
      --json --output "$OUT/serve-$engine-$m.json" >"$OUT/bench-$engine-$m.txt" 2>&1
    tail -25 "$OUT/bench-$engine-$m.txt" | tee -a "$LOG"
  else
    say "$engine did not come up"; tail -20 "$OUT/serve-$engine-$m.log" | tee -a "$LOG"
  fi
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$LOG"
for stage in "$@"; do
  m=${stage#*:}
  case $stage in
    build) build ;;
    files:*) files "$m" ;;
    speed:*) speed "$m" ;;
    serve:*) serve_one llama "$m"; serve_one ferrite "$m" ;;
    clean:*) rm -f "$W/$m"-*.gguf; say "removed $m's files" ;;
    *) say "unknown stage $stage" ;;
  esac
done
say "done: $*"; df -h "$W" | tail -1 | tee -a "$LOG"
