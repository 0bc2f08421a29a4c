#!/usr/bin/env bash
# `ferrite run-batch` (in-process) against `ferrite serve` loaded by `ferrite bench` (HTTP,
# streaming), on the same N completion requests: unique prompts of about PROMPT_TOKENS tokens,
# OUTPUT_LEN output tokens each (greedy, ignore_eos), same model and engine flags. bench sends
# all requests at once (its default), run-batch keeps its default --max-concurrency in flight.
# Prints each side's aggregate output tokens/s and their ratio (run-batch / bench).
#
#   bench/run_batch.sh [MODEL]                    # default: SmolLM2-135M-Instruct Q4_1
#   N=200 bench/run_batch.sh                      # a quicker run
#   ENGINE_ARGS="--max-num-seqs 32" bench/run_batch.sh
#
# Env: N (1000), PROMPT_TOKENS (128), OUTPUT_LEN (64), FERRITE_BIN (target/release/ferrite),
# ENGINE_ARGS (extra engine flags for both sides), RUN_BATCH_ARGS (extra run-batch flags),
# PORT (18517), ROUNDS (1: run-batch then bench, alternated that many times, which evens out
# a shared machine's changing load), OUT_DIR (a temporary directory; kept when given).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MODEL="${1:-${FERRITE_MODELS:-$HOME/.cache/ferrite/models}/SmolLM2-135M-Instruct.Q4_1.gguf}"
BIN="${FERRITE_BIN:-$ROOT/target/release/ferrite}"
N="${N:-1000}"
PROMPT_TOKENS="${PROMPT_TOKENS:-128}"
OUTPUT_LEN="${OUTPUT_LEN:-64}"
PORT="${PORT:-18517}"
ROUNDS="${ROUNDS:-1}"
ENGINE_ARGS="${ENGINE_ARGS:-}"
RUN_BATCH_ARGS="${RUN_BATCH_ARGS:-}"
NAME=bench-model
if [[ -n "${OUT_DIR:-}" ]]; then mkdir -p "$OUT_DIR"; else OUT_DIR="$(mktemp -d)"; fi
# shellcheck disable=SC2086  # ENGINE_ARGS and RUN_BATCH_ARGS are word lists on purpose
read -r -a engine_args <<< "$ENGINE_ARGS"
read -r -a run_batch_args <<< "$RUN_BATCH_ARGS"

[[ -f "$MODEL" || -d "$MODEL" ]] || { echo "no model at $MODEL" >&2; exit 1; }
[[ -x "$BIN" ]] || { echo "no ferrite binary at $BIN (cargo build --release -p ferrite)" >&2; exit 1; }

# The same prompts twice: as a Batch file for run-batch and as a replay dataset for bench.
python3 - "$OUT_DIR" "$N" "$PROMPT_TOKENS" "$OUTPUT_LEN" "$NAME" <<'PY'
import json, random, sys
out, n, prompt_tokens, output_len, name = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
words = ("time year people way day man thing woman life child world school state family student "
         "group country problem hand part place case week company system program question work "
         "government number night point home water room mother area money story fact month lot "
         "right study book eye job word business issue side kind head house service friend father "
         "power hour game line end member law car city community name president team minute idea "
         "kid body information back parent face others level office door health person art war "
         "history party result change morning reason research girl guy moment air teacher force").split()
rng = random.Random(0)
# Common English words with a space are about one token each in BPE vocabularies; the
# request number first makes every prompt unique from its first token (no prefix-cache help).
with open(f"{out}/requests.jsonl", "w") as batch, open(f"{out}/dataset.jsonl", "w") as replay:
    for i in range(n):
        prompt = f"{i}: " + " ".join(rng.choice(words) for _ in range(prompt_tokens - 4))
        body = {"model": name, "prompt": prompt, "max_tokens": output_len, "temperature": 0,
                "ignore_eos": True}
        batch.write(json.dumps({"custom_id": f"req-{i}", "method": "POST",
                                "url": "/v1/completions", "body": body}) + "\n")
        replay.write(json.dumps({"prompt": prompt, "max_tokens": output_len}) + "\n")
PY

run_batch_once() {  # prints run-batch's output tokens/s
    rm -f "$OUT_DIR/results.jsonl"
    /usr/bin/time -f "%U %S" -o "$OUT_DIR/run_batch.cpu" \
        "$BIN" run-batch "$MODEL" -i "$OUT_DIR/requests.jsonl" -o "$OUT_DIR/results.jsonl" \
        --served-model-name "$NAME" "${engine_args[@]}" "${run_batch_args[@]}" \
        2> "$OUT_DIR/run_batch.log" > "$OUT_DIR/run_batch.txt"
    sed 's/^/   /' "$OUT_DIR/run_batch.txt" >&2
    python3 - "$OUT_DIR/results.jsonl" <<'PY' >&2
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
ok = [l for l in lines if l["response"] and l["response"]["status_code"] == 200]
usage = [l["response"]["body"]["usage"] for l in ok]
print(f"   {len(ok)}/{len(lines)} answered 200; mean prompt tokens "
      f"{sum(u['prompt_tokens'] for u in usage) / max(len(usage), 1):.1f}, mean output tokens "
      f"{sum(u['completion_tokens'] for u in usage) / max(len(usage), 1):.1f}")
PY
    sed -n 's/^output tokens .*(\([0-9.]*\) tok\/s)$/\1/p' "$OUT_DIR/run_batch.txt"
}

serve_bench_once() {  # prints bench's output tokens/s
    "$BIN" serve "$MODEL" --port "$PORT" --served-model-name "$NAME" "${engine_args[@]}" \
        > "$OUT_DIR/serve.log" 2>&1 &
    server=$!
    trap 'kill $server 2>/dev/null || true' EXIT
    for _ in $(seq 1 300); do
        curl -sf "http://127.0.0.1:$PORT/health" > /dev/null && break
        kill -0 $server 2>/dev/null || { cat "$OUT_DIR/serve.log" >&2; exit 1; }
        sleep 0.2
    done
    /usr/bin/time -f "%U %S" -o "$OUT_DIR/bench.cpu" "$BIN" bench --url "http://127.0.0.1:$PORT" --endpoint completions --workload replay \
        --dataset "$OUT_DIR/dataset.jsonl" --num-requests "$N" --max-duration 3600 \
        --no-progress --output "$OUT_DIR/bench.json" > "$OUT_DIR/bench.txt"
    # The server's CPU seconds (model loading included, as run-batch's are), before it exits.
    read -r -a stat < "/proc/$server/stat"
    awk -v u="${stat[13]}" -v s="${stat[14]}" -v hz="$(getconf CLK_TCK)" \
        'BEGIN {print u / hz, s / hz}' > "$OUT_DIR/serve.cpu"
    kill $server
    wait $server 2>/dev/null || true
    trap - EXIT
    python3 - "$OUT_DIR/bench.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
sys.stderr.write(f"   {r['completed']}/{r['info']['num_requests']} completed, {r['failed']} failed, "
                 f"{r['duration_s']:.2f} s, {r['total_output_tokens']} output tokens\n")
print(f"{r['output_token_throughput']:.1f}")
PY
}

batch_all=(); bench_all=()
for round in $(seq 1 "$ROUNDS"); do
    echo "== round $round/$ROUNDS; load $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min), $(nproc) cores"
    echo "-- run-batch: $N requests"
    batch_all+=("$(run_batch_once)")
    echo "-- ferrite serve + ferrite bench: $N requests"
    bench_all+=("$(serve_bench_once)")
    cpu_batch=$(awk '{print $1 + $2}' "$OUT_DIR/run_batch.cpu")
    cpu_served=$(awk '{s += $1 + $2} END {print s}' "$OUT_DIR/serve.cpu" "$OUT_DIR/bench.cpu")
    echo "-- output tok/s: run-batch ${batch_all[-1]}, bench ${bench_all[-1]}; CPU seconds" \
        "(a measure the machine's other load disturbs less): run-batch $cpu_batch," \
        "serve + bench $cpu_served"
done
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "${batch_all[*]}" "${bench_all[*]}" <<'PY'
import sys
batch, bench = ([float(x) for x in a.split()] for a in sys.argv[1:3])
mean = lambda v: sum(v) / len(v)
print("== aggregate output tokens/s, mean of the rounds")
print(f"   run-batch  {mean(batch):.1f}   ({', '.join(f'{x:.1f}' for x in batch)})")
print(f"   bench      {mean(bench):.1f}   ({', '.join(f'{x:.1f}' for x in bench)})")
print(f"   ratio      {mean(batch) / mean(bench):.3f}  (run-batch / bench)")
PY
echo "   files in $OUT_DIR"
