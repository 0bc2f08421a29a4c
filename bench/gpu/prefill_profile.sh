#!/usr/bin/env bash
# Where a 4,096-token prefill's time goes (issue 16 item 2), run on the device from the
# repository root with .gpu/ carried: Nsight Compute's duration of every kernel of an eager
# offline_bench run (one request of 4,096 tokens, then three more: the last is a warm prefill),
# summed by kernel over the last forward pass by bench/gpu/kernel_times.py; then the warm
# prefill without the profiler and, when PEER is set to hf_prefill.py's path, the
# transformers peer in the same call. Logs go to $OUT.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ferrite-gpu-out}
mkdir -p "$OUT"
G=.gpu
SHAPES=${SHAPES:-"qwen2.5-1.5b llama-3.1-8b"}
for shape in $SHAPES; do
  echo "== $shape: offline_bench 1 4096 1 (graphs), warm and first request"
  timeout 120 $G/offline_bench "$shape" 1 4096 1 2>>"$OUT/prefill-bench.log" | grep RESULT
  echo "== $shape: ncu over an eager run"
  timeout 300 ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
    $G/offline_bench "$shape" 1 4096 1 eager >"$OUT/ncu-prefill-$shape.csv" 2>"$OUT/ncu-prefill-$shape.err"
  echo "ncu rc=$?"
  python3 bench/gpu/kernel_times.py "$OUT/ncu-prefill-$shape.csv" | tee "$OUT/prefill-profile-$shape.txt" | head -60
  if [ -n "${PEER:-}" ]; then
    peer_shape=$shape; [ "$shape" = llama-3.1-8b ] && peer_shape=llama3.1-8b
    echo "== transformers peer $peer_shape 4096"
    timeout 180 python3 "$PEER" "$peer_shape" 4096 2>>"$OUT/peer.log" | grep RESULT
  fi
done
