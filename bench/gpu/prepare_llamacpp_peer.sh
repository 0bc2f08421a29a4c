#!/usr/bin/env bash
# Makes .gpu-peer-hybrid/ (git-ignored) for bench/gpu/vs_llamacpp.sh, here on the build
# machine: llama.cpp's sources at ec562eb (the version whose converter wrote the hybrid and
# gpt-oss fixtures; qwen35 / qwen35moe need it), without the other backends, the web UI and the
# model files (scripts/ stays: newer llama-server builds run scripts/ui-assets.cmake, which
# embeds an empty UI table when no assets are there), and the stripped release ferrite binary
# (built with the pip nvcc as bench/gpu/build.sh does).
#   LLAMA_REPO=path/to/a/llama.cpp/clone bash bench/gpu/prepare_llamacpp_peer.sh
# or, where no clone can be had, an unpacked source tree of another version (the one
# llama-cpp-python's PyPI sdist vendors: 0.3.36 -> 0c1e57098, which has qwen35, qwen35moe and
# gpt-oss too); the version goes into the pack as LLAMA_VERSION for the logs:
#   LLAMA_SRC=path/to/vendor/llama.cpp LLAMA_VERSION=0c1e57098 bash bench/gpu/prepare_llamacpp_peer.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
P=.gpu-peer-hybrid
REV=ec562eb673ab6fef464d0cf976bcb57925b5eff0
mkdir -p "$P"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "${LLAMA_SRC:-}" ]; then
  mkdir -p "$tmp/llama.cpp"
  tar -cf - -C "$LLAMA_SRC" --exclude=tools/server/public --exclude=tools/server/webui \
    --exclude=tools/ui/tests ggml src include common tools vendor cmake scripts CMakeLists.txt \
    gguf-py LICENSE |
    tar -x -C "$tmp/llama.cpp"
  echo "${LLAMA_VERSION:-unknown}" >"$tmp/llama.cpp/LLAMA_VERSION"
else
  git -C "$LLAMA_REPO" archive --format=tar --prefix=llama.cpp/ "$REV" ggml src include common tools \
    vendor cmake scripts CMakeLists.txt gguf-py LICENSE ':(exclude)tools/server/public' \
    ':(exclude)tools/server/webui' | tar -x -C "$tmp"
  echo "$REV" >"$tmp/llama.cpp/LLAMA_VERSION"
fi
for b in vulkan sycl metal cann musa opencl hexagon webgpu zdnn zendnn virtgpu openvino; do
  rm -rf "$tmp/llama.cpp/ggml/src/ggml-$b"
done
tar -cf - -C "$tmp" llama.cpp | xz -T2 -6 >"$P/llama.cpp.tar.xz"
cp target/release/ferrite "$tmp/ferrite" && strip "$tmp/ferrite"
xz -T2 -6 -c "$tmp/ferrite" >"$P/ferrite.xz"
du -sh "$P"/*
