#!/usr/bin/env bash
# The whole test-suite, as CI runs it: fetch the real models, build, run the Rust tests
# (units, property tests, parity against the transformers fixtures, batch invariance) and the
# end-to-end tests over HTTP with the official `openai` client.
set -euo pipefail
cd "$(dirname "$0")/.."
export FERRITE_MODELS=${FERRITE_MODELS:-$HOME/.cache/ferrite/models}

echo "== structure (import circles, file length)"
scripts/check_structure.sh

echo "== models"
scripts/fetch_models.sh smollm2 qwen0.5b gemma3

echo "== nvcc 13.0 (pip wheels, cached in .cuda-venv/) so build.rs really compiles the CUDA kernels"
if ! ls .cuda-venv/lib/python3*/site-packages/nvidia/cu13/bin/nvcc >/dev/null 2>&1; then
  python3 -m venv .cuda-venv
  .cuda-venv/bin/pip install -q -r scripts/nvcc-requirements.txt
fi
CUDA_HOME=$(echo "$PWD"/.cuda-venv/lib/python3*/site-packages/nvidia/cu13)
export CUDA_HOME PATH="$CUDA_HOME/bin:$PATH" FERRITE_REQUIRE_NVCC=1

echo "== build (release: the tests run real models)"
cargo build --release --locked -p ferrite

echo "== Kubernetes manifests (offline schema validation, flags checked against the binary)"
deploy/kubernetes/validate.sh "${CARGO_TARGET_DIR:-target}/release/ferrite"

echo "== rust tests"
cargo test --release --locked --workspace

echo "== end-to-end tests (openai client over HTTP)"
tests/e2e/run.sh
