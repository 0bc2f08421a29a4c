#!/usr/bin/env bash
# The whole test-suite, as CI runs it: fetch the real models, build, run the Rust tests
# (units, property tests, parity against the transformers fixtures, batch invariance) and the
# end-to-end tests over HTTP with the official `openai` client.
set -euo pipefail
cd "$(dirname "$0")/.."
export FERRITE_MODELS=${FERRITE_MODELS:-$HOME/.cache/ferrite/models}

echo "== models"
scripts/fetch_models.sh smollm2 qwen0.5b

echo "== build (release: the tests run real models)"
cargo build --release --locked -p ferrite

echo "== rust tests"
cargo test --release --locked --workspace

echo "== end-to-end tests (openai client over HTTP)"
tests/e2e/run.sh
