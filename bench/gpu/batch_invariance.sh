#!/usr/bin/env bash
# Issue 16, batch invariance on the H200. Two parts:
#
#   bash bench/gpu/batch_invariance.sh synthetic [tests|bench|all]
#       (carry .gpu-pack; unpacks it) the kernel and model invariance tests
#       (tests/batch_invariance.rs), the kernel, quantized, attention and CPU/CUDA parity
#       suites, then offline_bench on random bf16 weights with the invariant kernels
#       (FERRITE_BENCH_BATCH_INVARIANT=1, `--batch-invariant`) and without (the default),
#       same call, interleaved:
#       batch-1 decode (bf16, and Q4_K_M for the 8B), 64 streams, a 4,096-token prefill.
#
#   the real SmolLM2-135M-Instruct Q4_1, which travels in three calls like
#   bench/gpu/spec_suffix.sh (prepare here; stage 1, stage 2, stage 3 there), then
#   bash bench/gpu/batch_invariance.sh real
#       16 greedy chat prompts sent one at a time, then all 16 at once, to `ferrite serve
#       --device cuda`: with the file's matrices widened to bf16 (FERRITE_CUDA_WIDEN_QUANT=1)
#       invariant and not, and kept quantized (the default load) invariant; answers compared
#       text for text.
# Logs and a summary under $OUT.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ferrite-gpu-out}
mkdir -p "$OUT"
declare -a ROWS
row() { ROWS+=("$1"); }

synthetic() {
    [ -d .gpu ] || tar -xJf .gpu-pack/gpu.tar.xz
    G=.gpu
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    local part=${1:-all}  # tests | bench | all
    [ "$part" = bench ] || for t in "batch_invariance 240" "kernels 120" "quant_kernels 120" "attention 90" "parity 300"; do
        set -- $t
        echo "== test $1"
        timeout "$2" "$G/tests/$1" --test-threads=1 --nocapture >"$OUT/test-$1.log" 2>&1
        local rc=$?
        grep -E "bit-identical|differs|relative error [0-9.e-]+ \(|parity |SKIPPED|panicked|^test result" "$OUT/test-$1.log" | tail -25
        row "test $1 | rc=$rc | $(grep -E '^test result' "$OUT/test-$1.log" | tail -1)"
    done
    bench() {  # label, invariant (1/0), limit, args...
        local label=$1 inv=$2 limit=$3; shift 3
        local line
        line=$(timeout "$limit" env FERRITE_BENCH_BATCH_INVARIANT="$inv" ${BENCH_QUANT:+FERRITE_BENCH_QUANT=$BENCH_QUANT} $G/offline_bench "$@" 2>>"$OUT/bench.log" | grep RESULT | sed 's/^RESULT //' | paste -sd' ')
        echo "$label invariant=$inv: $line"
        row "$label | invariant=$inv | $line"
    }
    [ "$part" = tests ] && return
    for round in 1; do
        for inv in 1 0; do
            bench "1.5B batch-1 (128, 512)" $inv 90 qwen2.5-1.5b 1 128 512
            bench "8B batch-1 (128, 256)" $inv 120 llama-3.1-8b 1 128 256
        done
    done
    for inv in 1 0; do
        BENCH_QUANT=q4_k_m bench "8B Q4_K_M batch-1 (128, 256)" $inv 150 llama-3.1-8b 1 128 256
    done
    for inv in 1 0; do
        bench "1.5B 64x(128, 128)" $inv 90 qwen2.5-1.5b 64 128 128
        bench "1.5B prefill 4096" $inv 60 qwen2.5-1.5b 1 4096 1
        bench "8B prefill 4096" $inv 90 llama-3.1-8b 1 4096 1
    done
}

real() {
    local W=/root/w MODEL=SmolLM2-135M-Instruct.Q4_1.gguf
    local SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    [ -x "$W/ferrite" ] || { xz -dc "$W/ferrite.xz" >"$W/ferrite" && chmod +x "$W/ferrite"; }
    [ -f "$W/$MODEL" ] || cat "$W"/part.a? >"$W/$MODEL"
    echo "$SHA  $W/$MODEL" | sha256sum -c - || return 1
    local port=18471
    for mode in "widened invariant" "widened dependent" "quantized invariant"; do
        set -- $mode
        local envs=() flags=()
        [ "$1" = widened ] && envs=(FERRITE_CUDA_WIDEN_QUANT=1)
        [ "$2" = invariant ] && flags=(--batch-invariant)
        local log="$OUT/serve-$1-$2.log"
        env "${envs[@]}" "$W/ferrite" serve "$W/$MODEL" --device cuda --port $port \
            --served-model-name smollm2 "${flags[@]}" >"$log" 2>&1 &
        local pid=$!
        for _ in $(seq 1 300); do
            curl -sf localhost:$port/health >/dev/null 2>&1 && break
            kill -0 $pid 2>/dev/null || break
            sleep 0.1
        done
        local verdict
        verdict=$(python3 bench/gpu/alone_vs_batched.py "http://localhost:$port" "$OUT/answers-$1-$2.json" 2>&1 | tail -1)
        kill $pid 2>/dev/null
        wait $pid 2>/dev/null
        echo "$1 $2: $verdict"
        row "SmolLM2 Q4_1 $1 $2 | $verdict"
    done
}

case "${1:-}" in
synthetic) synthetic "${2:-all}" ;;
real) real ;;
*) echo "usage: $0 synthetic|real" >&2; exit 2 ;;
esac
echo; echo "================ SUMMARY $(date -u +%FT%TZ) ================"
printf '%s\n' "${ROWS[@]}" | tee "$OUT/summary.txt"
