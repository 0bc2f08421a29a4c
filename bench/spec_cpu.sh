#!/usr/bin/env bash
# Speculative decoding on the CPU, side by side in one run: ferrite plain / n-gram / suffix / draft model
# (whole vocabulary, and scoring the first --draft-vocab ids)
# against llama-server plain / with its draft model, same GGUF files, same threads.
#
#   target  Qwen2.5-Coder-1.5B-Instruct Q4_K_M      draft  Qwen2.5-Coder-0.5B-Instruct Q4_K_M
#   code    bench/spec/code_prompts.jsonl  (complete / translate / rewrite a function)
#   edit    bench/spec/edit_prompts.jsonl  (edit a given file, output the whole file)
#
# Each (server, workload, concurrency) is one `ferrite bench --workload replay` run, greedy,
# streaming; bench/summarize_spec.py tabulates output tokens/s, decode tokens/s per request
# (1 / TPOT), their ratio to the same engine's plain decoding, and for ferrite the mean
# acceptance length read from /metrics. Servers run one at a time (2 cores: anything running
# beside a measurement disturbs it).
#
#   bench/spec_cpu.sh                              # everything (about 50 minutes)
#   bench/spec_cpu.sh --concurrency 1 --workloads code --servers ferrite-plain,ferrite-draft
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MODELS_DIR="${FERRITE_MODELS:-$HOME/.cache/ferrite/models}"
TARGET="$MODELS_DIR/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
DRAFT="$MODELS_DIR/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
THREADS=2
CONCURRENCY="1,4,16"
WORKLOADS="code,edit"
SERVERS="ferrite-plain,ferrite-ngram,ferrite-suffix,ferrite-draft,ferrite-draftvocab,llama-plain,llama-draft"
DRAFT_VOCAB=32768
K=""
PORT=18441
RUN_TIMEOUT=900
BUILD=1
OUT_DIR=""

usage() {
    echo "usage: $0 [options]"
    echo "  --servers LIST      of ferrite-plain,ferrite-ngram,ferrite-suffix,ferrite-draft,ferrite-draftvocab,"
    echo "                      llama-plain,llama-draft (draftvocab: --draft-vocab, below)"
    echo "  --draft-vocab N     ferrite-draftvocab's --draft-vocab (default: $DRAFT_VOCAB)"
    echo "  --workloads LIST    of code,edit (default: $WORKLOADS)"
    echo "  --concurrency LIST  (default: $CONCURRENCY)"
    echo "  --threads N         (default: $THREADS)"
    echo "  --k N               ferrite's --num-speculative-tokens [default: 4 draft, 8 ngram, 24 suffix]"
    echo "  --no-build          use target/release/ferrite as it is"
    echo "  --out DIR           write into DIR (e.g. an earlier run's, to add servers to it)"
}
while [[ $# -gt 0 ]]; do
    case "$1" in
        --servers) SERVERS="$2"; shift 2 ;;
        --workloads) WORKLOADS="$2"; shift 2 ;;
        --concurrency) CONCURRENCY="$2"; shift 2 ;;
        --threads) THREADS="$2"; shift 2 ;;
        --k) K="$2"; shift 2 ;;
        --draft-vocab) DRAFT_VOCAB="$2"; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        --out) OUT_DIR="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
done
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
for f in "$TARGET" "$DRAFT"; do
    [[ -f "$f" ]] || { echo "missing $f: run scripts/fetch_models.sh qwen0.5b qwen1.5b" >&2; exit 2; }
done
if [[ $BUILD == 1 ]]; then (cd "$ROOT" && cargo build --release -p ferrite >&2); fi
FERRITE="$ROOT/target/release/ferrite"
LLAMA_BIN=""
if [[ ",$SERVERS," == *",llama-"* ]]; then LLAMA_BIN="$("$ROOT/bench/llama_cpp/build.sh")"; fi

STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
OUT="${OUT_DIR:-$ROOT/bench/results/spec-$STAMP}"
OUT="${OUT%/}"
mkdir -p "$OUT"
PID=""
stop_server() {
    if [[ -n "$PID" ]]; then
        kill "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
        PID=""
    fi
}
trap stop_server EXIT

start_server() {
    local name="$1" log="$OUT/$1.log"
    local ferrite=("$FERRITE" serve "$TARGET" --port "$PORT" --threads "$THREADS")
    local llama=("$LLAMA_BIN/llama-server" -m "$TARGET" --port "$PORT" -t "$THREADS" -tb "$THREADS"
        -np 16 --cont-batching -c 65536 --metrics)
    case "$name" in
        ferrite-plain) "${ferrite[@]}" >"$log" 2>&1 & ;;
        ferrite-ngram) "${ferrite[@]}" --speculative ngram \
                           --num-speculative-tokens "${K:-8}" >"$log" 2>&1 & ;;
        ferrite-suffix) "${ferrite[@]}" --speculative suffix \
                           --num-speculative-tokens "${K:-24}" >"$log" 2>&1 & ;;
        ferrite-draft) "${ferrite[@]}" --speculative draft --draft-model "$DRAFT" \
                           --num-speculative-tokens "${K:-4}" >"$log" 2>&1 & ;;
        ferrite-draftvocab) "${ferrite[@]}" --speculative draft --draft-model "$DRAFT" \
                           --draft-vocab "$DRAFT_VOCAB" \
                           --num-speculative-tokens "${K:-4}" >"$log" 2>&1 & ;;
        llama-plain) "${llama[@]}" >"$log" 2>&1 & ;;
        llama-draft) "${llama[@]}" --model-draft "$DRAFT" --spec-type draft-simple \
                         -td "$THREADS" -tbd "$THREADS" >"$log" 2>&1 & ;;
        *) echo "unknown server $name" >&2; exit 2 ;;
    esac
    PID=$!
    for _ in $(seq 1 240); do
        if ! kill -0 "$PID" 2>/dev/null; then
            echo "$name exited; see $log" >&2
            tail -5 "$log" >&2
            exit 1
        fi
        [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health")" == 200 ]] && return 0
        sleep 0.5
    done
    echo "$name did not become healthy" >&2
    exit 1
}

# A dataset of at least `n` requests: the workload's prompts, repeated, each repeat tagged so
# that no prefix cache answers it from an earlier repeat's pages.
dataset() {
    local workload="$1" n="$2" out="$OUT/$1-$2.jsonl"
    python3 - "$ROOT/bench/spec/${workload}_prompts.jsonl" "$n" "$out" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
n = int(sys.argv[2])
with open(sys.argv[3], "w") as f:
    for i in range(max(n, len(lines))):
        req = json.loads(json.dumps(lines[i % len(lines)]))
        if i >= len(lines):
            req["messages"][0]["content"] = f"(request {i})\n" + req["messages"][0]["content"]
        f.write(json.dumps(req) + "\n")
PY
    echo "$out"
}

IFS=, read -ra servers <<<"$SERVERS"
IFS=, read -ra workloads <<<"$WORKLOADS"
IFS=, read -ra concurrencies <<<"$CONCURRENCY"
for server in "${servers[@]}"; do
    start_server "$server"
    for workload in "${workloads[@]}"; do
        for c in "${concurrencies[@]}"; do
            n=$(( c < 8 ? 8 : c ))
            if [[ $workload == edit && $c == 1 ]]; then n=6; fi
            data="$(dataset "$workload" "$n")"
            out="$OUT/$server-$workload-c$c.json"
            curl -s "http://127.0.0.1:$PORT/metrics" >"$out.metrics-before" || true
            log "$server $workload c=$c ($n requests)"
            timeout "$RUN_TIMEOUT" "$FERRITE" bench --url "http://127.0.0.1:$PORT" --no-progress \
                --endpoint chat --workload replay --dataset "$data" --num-requests "$n" \
                --max-concurrency "$c" --no-ignore-eos --max-duration $((RUN_TIMEOUT - 30)) \
                --json --output "$out" >/dev/null 2>"$out.log" || log "FAILED: $out.log"
            curl -s "http://127.0.0.1:$PORT/metrics" >"$out.metrics-after" || true
        done
    done
    stop_server
done
python3 "$ROOT/bench/summarize_spec.py" "$OUT" | tee "$OUT.md"
