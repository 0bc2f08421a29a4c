#!/usr/bin/env bash
# Builds everything bench/gpu/run.sh needs on the H200 into .gpu/ (git-ignored): the release
# `ferrite` binary, the ferrite-cuda test executables and the offline_bench example, compiled
# with the pip nvcc 13.0 so the sm_90 cubins are embedded, stripped; then packs .gpu/ into
# .gpu-pack/gpu.tar.xz (each executable embeds the same cubins, so .gpu/ itself is larger than
# what a device command may carry). On the device:
#   tar -xJf .gpu-pack/gpu.tar.xz && bash bench/gpu/run.sh all      (carry: .gpu-pack)
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ ! -x .cuda-venv/bin/nvcc ] && ! ls .cuda-venv/lib/python3*/site-packages/nvidia/cu13/bin/nvcc >/dev/null 2>&1; then
  python3 -m venv .cuda-venv
  .cuda-venv/bin/pip install -q nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 \
      nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85
fi
CUDA_HOME=$(echo "$PWD"/.cuda-venv/lib/python3*/site-packages/nvidia/cu13)
export CUDA_HOME PATH="$CUDA_HOME/bin:$PATH" FERRITE_REQUIRE_NVCC=1
nvcc --version | tail -1
target=${CARGO_TARGET_DIR:-target}
cargo build --release --locked -p ferrite
cargo build --release --locked -p ferrite-cuda --example offline_bench
tests=$(cargo test --release --locked -p ferrite-cuda --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import sys, json
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] != ["example"]:
        print(m["target"]["name"], m["executable"])')
rm -rf .gpu && mkdir -p .gpu/tests
cp "$target/release/ferrite" "$target/release/examples/offline_bench" .gpu/
while read -r name exe; do cp "$exe" ".gpu/tests/$name"; done <<< "$tests"
strip .gpu/ferrite .gpu/offline_bench .gpu/tests/*
cp "$(ls -t "$target"/release/build/ferrite-cuda-*/out/ptxas.txt | head -1)" .gpu/ptxas.txt
ls -la .gpu .gpu/tests
du -sh .gpu
mkdir -p .gpu-pack
# One stream with a dictionary larger than an executable: the cubins every executable
# embeds compress to one copy (about 11 MB in all, where per-file xz made over 60 MB, past
# what a device call carries with the tree).
tar -cf - .gpu | xz -T1 --lzma2=preset=6,dict=256MiB >.gpu-pack/gpu.tar.xz
ls -la .gpu-pack/gpu.tar.xz
