#!/usr/bin/env bash
# Makes the random-weight MoE GGUF of the CPU side by side (issue 13): writes it in F16 with
# bench/moe/make_gguf.py (gguf-py; the tokenizer from the Qwen2.5-Coder-0.5B GGUF, fetched by
# scripts/fetch_models.sh qwen0.5b), then quantizes it to Q4_K_M with llama.cpp's llama-quantize
# (built by bench/llama_cpp/build.sh), as a user turns a checkpoint into a GGUF. Idempotent:
# prints the path and does nothing when the file exists. About 3 minutes on 2 cores; needs
# ~4 GB of free disk for the F16 intermediate (deleted afterwards).
#
#   bench/moe/make.sh                 # -> $MODELS_DIR/qwen3moe-random-16x1024-64e-q4_k_m.gguf
#   MAKE_GGUF_ARGS="--layers 4" bench/moe/make.sh   # another shape (name it with OUT_NAME)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
MODELS_DIR="${FERRITE_MODELS:-$HOME/.cache/ferrite/models}"
OUT_NAME="${OUT_NAME:-qwen3moe-random-16x1024-64e-q4_k_m.gguf}"
OUT="$MODELS_DIR/$OUT_NAME"
TOKENIZER="$MODELS_DIR/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"

if [[ -f "$OUT" ]]; then
    echo "$OUT"
    exit 0
fi
[[ -f "$TOKENIZER" ]] || bash "$ROOT/scripts/fetch_models.sh" qwen0.5b >&2
python3 -c "import gguf, numpy" 2>/dev/null || python3 -m pip install --quiet gguf numpy >&2
BIN="$(bash "$ROOT/bench/llama_cpp/build.sh")"

F16="$OUT.f16.tmp"
trap 'rm -f "$F16"' EXIT
python3 "$ROOT/bench/moe/make_gguf.py" --tokenizer-from "$TOKENIZER" --out "$F16" ${MAKE_GGUF_ARGS:-} >&2
echo "[moe make] quantizing to Q4_K_M" >&2
"$BIN/llama-quantize" "$F16" "$OUT.tmp" Q4_K_M 2 >"$OUT.quantize.log" 2>&1 \
    || { tail -20 "$OUT.quantize.log" >&2; exit 1; }
mv "$OUT.tmp" "$OUT"
echo "$OUT"
