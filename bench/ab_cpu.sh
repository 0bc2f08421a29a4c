#!/usr/bin/env bash
# A/B of two ferrite builds on the CPU: `ferrite bench-model` (pp512 and tg128, 2 threads)
# on the same GGUF files, rounds interleaved A, B, A, B, ... so that the drift of a shared
# machine hits both alike; prints each round and the medians.
# Usage: bench/ab_cpu.sh BIN_A BIN_B [ROUNDS] [MODEL.gguf ...]
# Default models: the two test models in $FERRITE_MODELS (SmolLM2 Q4_1, Qwen2.5-Coder-0.5B Q4_K_M).
set -euo pipefail
a=$1 b=$2 rounds=${3:-3}
shift $(( $# >= 3 ? 3 : 2 ))
models=${FERRITE_MODELS:-$HOME/.cache/ferrite/models}
[ $# -gt 0 ] || set -- "$models/SmolLM2-135M-Instruct.Q4_1.gguf" "$models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
results=$(mktemp)
for model in "$@"; do
  for round in $(seq 1 "$rounds"); do
    for side in A B; do
      bin=$a; [ $side = B ] && bin=$b
      json=$("$bin" bench-model "$model" --threads 2 --repetitions 3 --json 2>/dev/null \
        | python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)))')
      echo "$(basename "$model") $side $round $json" | tee -a "$results" | cut -c1-200
    done
  done
done
python3 - "$results" <<'PY'
import json, sys, statistics
rows = {}
for line in open(sys.argv[1]):
    model, side, _round, payload = line.split(" ", 3)
    for test in json.loads(payload)["results"]:
        rows.setdefault((model, test["test"], side), []).extend(test["samples_ts"])
print(f"{'model':45} {'test':8} {'A tok/s':>9} {'B tok/s':>9} {'B/A':>6}")
for (model, name, side) in sorted(rows):
    if side != "A":
        continue
    a = statistics.median(rows[(model, name, "A")])
    b = statistics.median(rows.get((model, name, "B"), [float("nan")]))
    print(f"{model:45} {name:8} {a:9.1f} {b:9.1f} {b / a:6.3f}")
PY
