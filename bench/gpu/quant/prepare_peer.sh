#!/usr/bin/env bash
# Makes .gpu-peer/ (git-ignored) for bench/gpu/quant/vs_llamacpp.sh, here on the build machine:
# llama.cpp's sources as vendored by llama-cpp-python 0.3.36 (PyPI), without what a CUDA build
# does not need; the Qwen2.5 tokenizer copied from the Qwen2.5-Coder-0.5B GGUF into a
# tensor-less GGUF; the random-GGUF writer of ../shared/gpu-peers; the stripped ferrite binary of
# bench/gpu/build.sh (.gpu/ferrite). About 17 MB, under a device call's carry limit.
set -euo pipefail
cd "$(dirname "$0")/../../.."
P=.gpu-peer
SHARED=${SHARED:-../shared/gpu-peers}
PY=${PYTHON:-python3}  # needs numpy and gguf (pip install gguf)
MODEL=${QWEN_GGUF:-$HOME/.cache/ferrite/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf}
mkdir -p "$P"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pip download -q --no-deps --no-binary llama-cpp-python llama-cpp-python==0.3.36 -d "$tmp"
tar -xzf "$tmp"/llama_cpp_python-0.3.36.tar.gz -C "$tmp"
v="$tmp/llama_cpp_python-0.3.36/vendor"
rm -rf "$v"/llama.cpp/{models,docs,tests,benches,media}
for b in vulkan sycl metal cann musa opencl hexagon webgpu zdnn zendnn; do rm -rf "$v/llama.cpp/ggml/src/ggml-$b"; done
tar -cJf "$P/llama.cpp.tar.xz" -C "$v" llama.cpp
cp "$SHARED/gguf_random.py" "$P/"
"$PY" "$P/gguf_random.py" vocab "$MODEL" "$tmp/vocab.gguf"
xz -c "$tmp/vocab.gguf" >"$P/vocab.gguf.xz"
xz -T2 -c .gpu/ferrite >"$P/ferrite.xz"
du -sh "$P"
