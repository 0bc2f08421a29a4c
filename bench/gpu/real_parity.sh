#!/usr/bin/env bash
# Issue 15's oracle on real files: CPU against CUDA on the real GGUF models of
# fixtures/reference (crates/cuda/tests/real_gguf_parity.rs), on the device. The files do not
# fit one call's carry (64 MiB with the repository's ~18 MB), so they travel in parts, one
# directory per call, each call within 30 s of the last (../shared/gpu.md):
#   here:                  bash bench/gpu/real_parity.sh prepare [FILE ...]
#                          (default: the SmolLM2 Q4_1 and Qwen2.5-Coder-0.5B Q4_K_M files from
#                          $FERRITE_MODELS or ~/.cache/ferrite/models; the test binary from
#                          .gpu/tests, made by bench/gpu/build.sh); prints the number of calls
#   device, call k:        bash bench/gpu/real_parity.sh stage k      (carry .gpu-real/k)
#   device, the last call: bash bench/gpu/real_parity.sh stage K && bash bench/gpu/real_parity.sh run
# A call that finds /root/w gone (the machine was given back) says so; start again at 1.
set -euo pipefail
cd "$(dirname "$0")/../.."
W=/root/w
PART_BYTES=44000000

case "${1:-}" in
prepare)
    shift
    models=${FERRITE_MODELS:-$HOME/.cache/ferrite/models}
    files=("$@")
    [ ${#files[@]} -gt 0 ] || files=(SmolLM2-135M-Instruct.Q4_1.gguf qwen2.5-coder-0.5b-instruct-q4_k_m.gguf)
    [ -x .gpu/tests/real_gguf_parity ] || { echo "run bench/gpu/build.sh first" >&2; exit 2; }
    rm -rf .gpu-real && mkdir -p .gpu-real/parts
    for f in "${files[@]}"; do
        split -b $PART_BYTES -d -a 2 "$models/$f" ".gpu-real/parts/$f.part"
        (cd "$models" && sha256sum "$f") >>.gpu-real/parts/SHA256SUMS
    done
    xz -T2 -c .gpu/tests/real_gguf_parity >.gpu-real/parts/real_gguf_parity.xz
    # First-fit: each call's directory takes parts until the next would pass PART_BYTES + 4 MB.
    k=0 used=$((PART_BYTES + 1))
    for p in $(ls -S .gpu-real/parts/*); do
        size=$(stat -c %s "$p")
        if [ $((used + size)) -gt $((PART_BYTES + 4000000)) ]; then
            k=$((k + 1)) used=0
            mkdir -p ".gpu-real/$k"
        fi
        mv "$p" ".gpu-real/$k/"
        used=$((used + size))
    done
    rmdir .gpu-real/parts
    du -sh .gpu-real/*
    echo "calls: $k"
    ;;
stage)
    mkdir -p "$W"
    [ "$2" = 1 ] || [ -n "$(ls $W 2>/dev/null)" ] || { echo "$W is empty: the machine was given back; start at stage 1" >&2; exit 3; }
    cp .gpu-real/"$2"/* "$W/"
    ls "$W" | wc -l
    ;;
run)
    OUT=${OUT:-/tmp/ferrite-gpu-out}
    mkdir -p "$OUT"
    cd "$W"
    for f in $(awk '{print $2}' SHA256SUMS); do
        cat "$f".part?? >"$f" && rm "$f".part??
    done
    sha256sum -c SHA256SUMS
    xz -dc real_gguf_parity.xz >real_gguf_parity && chmod +x real_gguf_parity
    cd - >/dev/null
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    FERRITE_MODELS=$W timeout 500 "$W/real_gguf_parity" --test-threads=1 --nocapture 2>&1 \
        | tee "$OUT/real_gguf_parity.log" | grep -E "^real|SKIPPED|panicked|test result"
    ;;
*)
    echo "usage: $0 prepare [FILE ...] | stage K | run" >&2
    exit 2
    ;;
esac
