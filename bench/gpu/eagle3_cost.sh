#!/usr/bin/env bash
# What an EAGLE-3 head costs on the GPU (issue 39: one draft step and one verification of k
# drafts at batch 1, 16 and 64 on the Llama-3.1-8B shape), run on the device from the
# repository root with .gpu/ from bench/gpu/build.sh. Random weights and a random head of the
# real shapes (ferrite_model::dummy::dummy_eagle3: one layer as wide as the model's, a
# 32,000-entry draft vocabulary), so nothing is accepted: this is price, not payoff. Fixed k
# drafts every step (FERRITE_BENCH_SPEC_FIXED=1); offline_bench reports the drafting time and
# the verifying forward pass per step (`draft_ms_per_step`, `verify_ms_per_step`) beside the
# plain run's step (`decode_step_forward_us`).
#   bash bench/gpu/eagle3_cost.sh          (BATCHES="1 16 64", KS="1 3 5" by default)
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ferrite-gpu-out}
mkdir -p "$OUT"
G=${G:-.gpu}
nvidia-smi --query-gpu=name --format=csv,noheader
r() {
  timeout 150 env "$@" 2>>"$OUT/eagle3-cost.log" | grep -E "RESULT (preset|spec)" | head -2 \
    | grep -oE "(decode|output)_tok_s=[0-9.]*|decode_step_forward_us=[0-9.]*|spec=.*" | tr '\n' ' '
  echo
}
e3="FERRITE_BENCH_SPEC=eagle3 FERRITE_BENCH_SPEC_FIXED=1"
for bs in ${BATCHES:-1 16 64}; do
  echo "8b bs=$bs plain: $(r $G/offline_bench llama-3.1-8b $bs 128 128)"
  for k in ${KS:-1 3 5}; do
    # shellcheck disable=SC2086
    echo "8b bs=$bs eagle3 k=$k: $(r $e3 FERRITE_BENCH_SPEC_K=$k $G/offline_bench llama-3.1-8b $bs 128 128)"
  done
done
