#!/usr/bin/env bash
# End-to-end tests: the real `ferrite serve` binary on SmolLM2, driven by the official `openai`
# Python client. Creates tests/e2e/.venv-e2e (git-ignored) on first use.
# Usage: tests/e2e/run.sh [pytest args...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv="$here/.venv-e2e"
# numpy and gguf: scripts/make_hf_test_dir.py, for the Hugging Face directory tests;
# jsonschema: validating structured outputs; anthropic: the /v1/messages tests; pyzmq and
# msgpack: the KV-events subscriber (test_ops_kv_events.py).
if ! "$venv/bin/python" -c "import openai, anthropic, pytest, httpx, numpy, gguf, jsonschema, zmq, msgpack" 2>/dev/null; then
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q "openai>=1.40" "anthropic>=0.40" "pytest>=8" httpx numpy gguf jsonschema pyzmq msgpack
fi
if [ -z "${FERRITE_BIN:-}" ]; then
  (cd "$root" && cargo build --release -p ferrite)
  # cargo puts it under CARGO_TARGET_DIR when that is set.
  target_dir=${CARGO_TARGET_DIR:-$root/target}
  case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac
  export FERRITE_BIN="$target_dir/release/ferrite"
fi
exec "$venv/bin/pytest" -q "$here" "$@"
