#!/usr/bin/env bash
# What the model's own MTP layer costs on the GPU (issue 37: the proposer's step cost at batch
# 1 and 16), run on the device from the repository root with .gpu/ from bench/gpu/build.sh
# (or G=.gpu2 for a diag pack's offline_bench). Random weights of the real shapes, so nothing
# is accepted: this is price, not payoff. Fixed k drafts every step
# (FERRITE_BENCH_SPEC_FIXED=1); offline_bench reports the drafting time and the verifying
# forward pass per step (`draft_ms_per_step`, `verify_ms_per_step`) beside the plain run's
# step (`decode_step_forward_us`).
#   bash bench/gpu/mtp_cost.sh          9B-style bf16 and the 27B shape in Q4_K_M
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ferrite-gpu-out}
mkdir -p "$OUT"
G=${G:-.gpu}
nvidia-smi --query-gpu=name --format=csv,noheader
r() {
  timeout 150 env "$@" 2>>"$OUT/mtp-cost.log" | grep -E "RESULT (preset|spec)" | head -2 \
    | grep -oE "(decode|output)_tok_s=[0-9.]*|decode_step_forward_us=[0-9.]*|spec=.*" | tr '\n' ' '
  echo
}
mtp="FERRITE_BENCH_SPEC=mtp FERRITE_BENCH_SPEC_FIXED=1"
S=bench/gpu/hybrid/qwen3.5-9b-style.json
for bs in 1 16; do
  echo "9b-style bs=$bs plain: $(r $G/offline_bench $S $bs 128 128)"
  for k in 1 3; do
    # shellcheck disable=SC2086
    echo "9b-style bs=$bs mtp k=$k: $(r $mtp FERRITE_BENCH_SPEC_K=$k $G/offline_bench $S $bs 128 128)"
  done
done
S=bench/gpu/hybrid/qwen3.5-27b.json
for bs in 1 16; do
  echo "27b q4_k_m bs=$bs plain: $(r FERRITE_BENCH_QUANT=q4_k_m $G/offline_bench $S $bs 128 128)"
  # shellcheck disable=SC2086
  echo "27b q4_k_m bs=$bs mtp k=1: $(r FERRITE_BENCH_QUANT=q4_k_m $mtp FERRITE_BENCH_SPEC_K=1 $G/offline_bench $S $bs 128 128)"
done
