#!/usr/bin/env bash
# EAGLE-3 on a real model on the GPU (issue 39's acceptance and batch-1 speed-up): SmolLM2-135M-
# Instruct Q4_1 (98 MB) travels in three parts, the head is trained there on the model's own
# answers (bench/gpu/train_eagle3.py) and served plain and with the head (bench/eagle3_serve.py
# --device cuda). The working tree takes about 30 of a call's 64 MiB, so four chained calls,
# each within the warm window (30 s) of the one before (everything lives in /root/w):
#
#   here:  split -b 34000000 SmolLM2-135M-Instruct.Q4_1.gguf .gpu-model/smol.
#          xz -T2 -6 -c .gpu/ferrite > .gpu-pack/ferrite.xz      (after bench/gpu/build.sh)
#          python3 -m pip download --no-deps -d .whl gguf==0.19.0  (not on the device)
#   1. bash bench/gpu/eagle3_real.sh part .gpu-model/smol.aa      carry .gpu-model/smol.aa
#   2. bash bench/gpu/eagle3_real.sh part .gpu-model/smol.ab      carry .gpu-model/smol.ab
#   3. bash bench/gpu/eagle3_real.sh train .gpu-model/smol.ac     carry .gpu-model/smol.ac, .whl
#   4. bash bench/gpu/eagle3_real.sh serve                        carry .gpu-pack/ferrite.xz
# Logs and results go to $OUT (the head itself too, after step 3; the tables after step 4).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ferrite-gpu-out}
W=/root/w
MODEL=$W/SmolLM2-135M-Instruct.Q4_1.gguf
SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
mkdir -p "$OUT" "$W"
case "${1:-}" in
part)
  cp "$2" "$W/" && ls -la "$W"
  ;;
train)
  cp "$2" "$W/" || exit 1
  cat "$W"/smol.a? >"$MODEL"
  echo "$SHA  $MODEL" | sha256sum -c - || exit 1
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  PYTHONPATH=/tmp/site python3 bench/gpu/train_eagle3.py --target "$MODEL" --out "$W/head" \
    --epochs "${EPOCHS:-8}" 2>&1 | tee "$OUT/train.log" | tail -25
  mkdir -p "$OUT/head" && cp "$W"/head/* "$OUT/head/"
  ;;
serve)
  xz -d -c .gpu-pack/ferrite.xz >"$W/ferrite" && chmod +x "$W/ferrite" || exit 1
  python3 bench/eagle3_serve.py --head "$W/head" --model "$MODEL" --binary "$W/ferrite" \
    --device cuda --out "$W/serve" 2>&1 | tail -40
  # At most 8 files come back: the tables, and every log in one archive.
  cp "$W"/serve/results.* "$OUT/"
  tar -czf "$OUT/serve-logs.tgz" -C "$W" serve
  ;;
*)
  echo "usage: eagle3_real.sh part FILE | train LAST_PART | serve" >&2
  exit 2
  ;;
esac
