#!/usr/bin/env bash
# Where a step's time goes on the GPU, run on the device from the repository root with .gpu/
# carried; logs go to $OUT. Nsight Compute times every kernel one at a time
# (--clock-control none), and bench/gpu/kernel_times.py sums one forward pass by kernel.
#   profile.sh decode    1.5B batch-1 decode: step rates with graphs, eagerly and with cuBLAS
#                        instead of the GEMV kernels, then the kernels of an eager decode step
#                        (decode-kernels: the kernels alone)
#   profile.sh prefill   a 4,096-token prefill of each of $SHAPES (default the 1.5B and 8B
#                        shapes): the warm prefill with graphs, then the kernels of the last
#                        (warm) forward pass of an eager run (NCU_SKIP / NCU_COUNT: a launch
#                        window for models too large to profile whole); with
#                        PEER=path/to/hf_prefill.py the transformers peer in the same call
#                        (issue 16 item 2)
#   profile.sh moe-decode  the same for a batch-1 decode step of Qwen3-30B-A3B's shape and
#                        of its dense twin (issue 13)
#   profile.sh decode-shapes  batch-1 decode of each of $SHAPES (presets or config files, e.g.
#                        bench/gpu/hybrid/qwen3.5-27b.json; FERRITE_BENCH_QUANT=q4_k_m for random
#                        Q4_K_M weights): the rate with graphs, then the kernels of a decode step
#   profile.sh decode-batch  the kernels of one decode step of 256 x (512 in, 128 out) for each
#                        of $SHAPES, well after the prompts (issue 16's 256-stream targets)
# BIN names another offline_bench build in .gpu/ (an A/B in one call); TAG marks its logs.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ferrite-gpu-out}
mkdir -p "$OUT"
G=.gpu
BIN=${BIN:-offline_bench}
TAG=${TAG:-}
PHASE=${1:-decode}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv
b() { timeout 120 env "$@" 2>>"$OUT/profile-bench.log" | grep RESULT; }
# kernels LABEL LIMIT "NCU_ARGS" FORWARD offline_bench args...: the kernel table of forward
# pass FORWARD (-1 the last, -2 the one before, when the window may cut the last short).
kernels() {
  local label=$1$TAG limit=$2 ncu_args=$3 forward=$4; shift 4
  echo "== $label: kernels (ncu $ncu_args, forward pass $forward)"
  # shellcheck disable=SC2086
  timeout "$limit" ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
    $ncu_args $G/$BIN "$@" >"$OUT/ncu-$label.csv" 2>"$OUT/ncu-$label.err"
  echo "ncu rc=$?"
  python3 bench/gpu/kernel_times.py "$OUT/ncu-$label.csv" --forward "$forward" \
    | tee "$OUT/profile-$label.txt" | head -70
}

if [ "$PHASE" = decode ]; then  # (decode-kernels: the kernel table alone)
  echo "== batch-1 decode, 1.5B: graphs / eager / cuBLAS instead of GEMV"
  b $G/offline_bench qwen2.5-1.5b 1 128 256
  b $G/offline_bench qwen2.5-1.5b 1 128 256 eager
  b FERRITE_GEMV_MAX_TOKENS=0 $G/offline_bench qwen2.5-1.5b 1 128 256
  echo "== batch-8 and batch-64 decode, 1.5B"
  b $G/offline_bench qwen2.5-1.5b 8 128 128
  b $G/offline_bench qwen2.5-1.5b 64 128 128
fi
if [ "$PHASE" = decode ] || [ "$PHASE" = decode-kernels ]; then
  kernels decode-1.5b "${NCU_LIMIT:-240}" "--launch-skip 4000 --launch-count 1500" -2 qwen2.5-1.5b 1 16 40 eager
fi

if [ "$PHASE" = prefill ]; then
  for shape in ${SHAPES:-qwen2.5-1.5b llama-3.1-8b}; do
    echo "== $shape: offline_bench 1 4096 1 (graphs): first request and warm"
    b $G/$BIN "$shape" 1 4096 1
    # One request, then three warm ones: the last forward pass is a warm 4,096-token prefill.
    # On a large model every kernel under ncu adds up past the limit: NCU_SKIP / NCU_COUNT
    # narrow the window (the backend's warm-up of eight prefill shapes comes first; the
    # 27B shape's passes are ~1,230 launches each).
    window=""
    [ -n "${NCU_SKIP:-}" ] && window="--launch-skip $NCU_SKIP"
    [ -n "${NCU_COUNT:-}" ] && window="$window --launch-count $NCU_COUNT"
    kernels "prefill-$shape" "${NCU_LIMIT:-300}" "$window" -1 "$shape" 1 4096 1 eager
    if [ -n "${PEER:-}" ]; then
      peer_shape=$shape; [ "$shape" = llama-3.1-8b ] && peer_shape=llama3.1-8b
      echo "== transformers peer $peer_shape 4096"
      timeout 180 python3 "$PEER" "$peer_shape" 4096 2>>"$OUT/peer.log" | grep RESULT
    fi
  done
fi

if [ "$PHASE" = decode-batch ]; then
  for shape in ${SHAPES:-qwen2.5-1.5b llama-3.1-8b}; do
    # 16 prompt chunks of 8,192 tokens come first; 15,000 launches in, the steps are decodes.
    kernels "decode256-$shape" "${NCU_LIMIT:-300}" "--launch-skip 15000 --launch-count 1200" -2 \
      "$shape" 256 512 128 eager
  done
fi

if [ "$PHASE" = decode-shapes ]; then
  for shape in ${SHAPES:-qwen2.5-1.5b}; do
    name=$(basename "$shape" .json)
    echo "== $name: offline_bench 1 128 256 (graphs)"
    b $G/$BIN "$shape" 1 128 256
    # The backend's warm-up runs a prefill of each chunk size first (~7,000-10,000 launches
    # on the 27B and 35B-A3B shapes, whose passes are 600-1,200 launches): 14,000 lands in
    # the decode steps of the larger shapes too (9,000 caught the 27B's 9-token warm-up
    # pass); the totals line's embedding grids tell the passes apart.
    kernels "decode-$name" "${NCU_LIMIT:-300}" "--launch-skip ${NCU_SKIP:-14000} --launch-count ${NCU_COUNT:-2500}" -2 \
      "$shape" 1 16 60 eager
  done
fi

if [ "$PHASE" = moe-decode ]; then
  M=bench/gpu/moe
  for cfg in qwen3-30b-a3b qwen3-30b-a3b-dense; do
    kernels "decode-$cfg" "${NCU_LIMIT:-300}" "--launch-skip 9000 --launch-count 2500" -2 $M/$cfg.json 1 16 40 eager
  done
fi
