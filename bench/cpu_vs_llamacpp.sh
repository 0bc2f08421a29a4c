#!/usr/bin/env bash
# ferrite against llama.cpp on the CPU, side by side in one run, same GGUF files, same threads:
#
#   speed    llama-bench ppP/tgG vs `ferrite bench-model` ppP/tgG, per model, A/B interleaved
#            in rounds; the medians of the rounds' means.
#   serving  `ferrite serve` vs `llama-server -np 16 --cont-batching` (SmolLM2), both up at
#            once and benchmarked alternately with `ferrite bench`: random workload, 256-token
#            prompts, 128 output tokens, concurrency 1, 4, 16: output tok/s, TTFT p50, ITL p50/p99.
#   prefix   16 requests sharing a 1,000-token prefix vs 16 cold prompts of the same length,
#            one at a time: TTFT p50, shared / cold.
#
# Writes a markdown report (date, machine, commit) to stdout and bench/results/<stamp>.md, the
# raw JSON of every run under bench/results/<stamp>/. Every run is bounded (timeouts); the full
# run takes about 20 minutes on 2 cores. On 2 cores llama.cpp's threads collapse when anything
# else runs: use a quiet machine.
#
#   bench/cpu_vs_llamacpp.sh                        # everything
#   bench/cpu_vs_llamacpp.sh --parts speed --models smollm --rounds 5
#   bench/cpu_vs_llamacpp.sh --quick                # small sizes: checks that it all works
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MODELS_DIR="${FERRITE_MODELS:-$HOME/.cache/ferrite/models}"
declare -A MODEL_FILES=(
    [smollm]="SmolLM2-135M-Instruct.Q4_1.gguf"
    [qwen05]="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    [qwen15]="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    # Random weights, Qwen3-MoE layout, Q4_K_M: made by bench/moe/make.sh on first use (issue 13).
    [moe]="qwen3moe-random-16x1024-64e-q4_k_m.gguf"
)

PARTS="speed,serving,prefix"
MODELS="smollm,qwen05,qwen15"
SERVE_MODEL="smollm"
THREADS=2
ROUNDS=3
REPS=3
PP=512
TG=128
CONCURRENCY="1,4,16"
REQUESTS_PER_SLOT=2
MIN_REQUESTS=4
SERVE_IN=256
SERVE_OUT=128
PREFIX_LEN=1000
PREFIX_REQUESTS=16
PREFIX_ROUNDS=1
BUILD_FERRITE=1
FERRITE_INT8=0
FERRITE_AMX=0
FERRITE_PORT=18431
LLAMA_PORT=18432
RUN_TIMEOUT=600

usage() {
    cat <<EOF
usage: $0 [options]
  --parts LIST           speed,serving,prefix (default: $PARTS)
  --models LIST          models of the speed part: smollm,qwen05,qwen15,moe (default: $MODELS;
                         moe: a random-weight Qwen3-MoE-layout Q4_K_M file, 16 layers x 64
                         experts, top 8, made by bench/moe/make.sh on first use, ~3 min)
  --serve-model NAME     model of the serving and prefix parts (default: $SERVE_MODEL)
  --threads N            threads for every engine (default: $THREADS)
  --rounds N             A/B rounds of the speed and serving parts; medians are taken (default: $ROUNDS)
  --reps N               repetitions per tool and round in the speed part (default: $REPS)
  --pp N / --tg N        prompt and generation lengths of the speed part (default: $PP / $TG)
  --concurrency LIST     serving concurrencies (default: $CONCURRENCY)
  --requests-per-slot N  serving requests = max($MIN_REQUESTS, N x concurrency) (default: $REQUESTS_PER_SLOT)
  --prefix-len N         shared prefix of the prefix part (default: $PREFIX_LEN)
  --prefix-requests N    requests per prefix run (default: $PREFIX_REQUESTS)
  --prefix-rounds N      rounds of the prefix part (default: $PREFIX_ROUNDS)
  --no-build             use target/release/ferrite as it is
  --ferrite-int8         speed part: also run ferrite with --int8-activations (lossy, opt-in)
  --ferrite-amx          speed part: also run ferrite with --amx-bf16 (bf16 on AMX tiles, opt-in)
  --quick                small sizes to check the script: pp 64, tg 16, 1 round, 1 rep,
                         concurrency 1,4, 32 output tokens, 4 prefix requests of a 200-token prefix
EOF
}

while [[ $# -gt 0 ]]; do
    case "$1" in
        --parts) PARTS="$2"; shift 2 ;;
        --models) MODELS="$2"; shift 2 ;;
        --serve-model) SERVE_MODEL="$2"; shift 2 ;;
        --threads) THREADS="$2"; shift 2 ;;
        --rounds) ROUNDS="$2"; shift 2 ;;
        --reps) REPS="$2"; shift 2 ;;
        --pp) PP="$2"; shift 2 ;;
        --tg) TG="$2"; shift 2 ;;
        --concurrency) CONCURRENCY="$2"; shift 2 ;;
        --requests-per-slot) REQUESTS_PER_SLOT="$2"; shift 2 ;;
        --prefix-len) PREFIX_LEN="$2"; shift 2 ;;
        --prefix-requests) PREFIX_REQUESTS="$2"; shift 2 ;;
        --prefix-rounds) PREFIX_ROUNDS="$2"; shift 2 ;;
        --no-build) BUILD_FERRITE=0; shift ;;
        --ferrite-int8) FERRITE_INT8=1; shift ;;
        --ferrite-amx) FERRITE_AMX=1; shift ;;
        --quick)
            PP=64; TG=16; ROUNDS=1; REPS=1; CONCURRENCY="1,4"; REQUESTS_PER_SLOT=1
            SERVE_OUT=32; PREFIX_LEN=200; PREFIX_REQUESTS=4; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
done

has_part() { [[ ",$PARTS," == *",$1,"* ]]; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
model_path() {
    local file="${MODEL_FILES[$1]:-}"
    [[ -n "$file" ]] || { echo "unknown model $1 (smollm, qwen05, qwen15, moe)" >&2; exit 2; }
    if [[ "$1" == moe && ! -f "$MODELS_DIR/$file" ]]; then
        OUT_NAME="$file" bash "$ROOT/bench/moe/make.sh" >&2
    fi
    [[ -f "$MODELS_DIR/$file" ]] || { echo "missing $MODELS_DIR/$file: run scripts/fetch_models.sh" >&2; exit 2; }
    echo "$MODELS_DIR/$file"
}

LLAMA_BIN="$("$ROOT/bench/llama_cpp/build.sh")"
if [[ "$BUILD_FERRITE" == 1 ]]; then
    log "building ferrite"
    (cd "$ROOT" && cargo build --release -p ferrite >&2)
fi
FERRITE="$ROOT/target/release/ferrite"
[[ -x "$FERRITE" ]] || { echo "no $FERRITE: build it or drop --no-build" >&2; exit 2; }

STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
OUT="$ROOT/bench/results/$STAMP"
mkdir -p "$OUT"
started=$(date +%s)

# The servers this script started, stopped on any exit.
SERVER_PIDS=()
cleanup() {
    for pid in "${SERVER_PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}
trap cleanup EXIT

wait_healthy() {
    local url="$1" pid="$2"
    for _ in $(seq 1 240); do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "the server behind $url exited; see its log in $OUT" >&2
            exit 1
        fi
        if [[ "$(curl -s -o /dev/null -w '%{http_code}' "$url/health")" == 200 ]]; then
            return 0
        fi
        sleep 0.5
    done
    echo "$url did not become healthy in 120 s" >&2
    exit 1
}

start_servers() {
    local model="$1" slots=16
    # Room in every llama-server slot for the prefix part's prompts (KV is split among slots).
    local ctx=$(( slots * (PREFIX_LEN + SERVE_IN + SERVE_OUT + 256) ))
    log "starting ferrite serve and llama-server -np $slots on $(basename "$model")"
    "$FERRITE" serve "$model" --port "$FERRITE_PORT" --threads "$THREADS" \
        >"$OUT/ferrite-serve.log" 2>&1 &
    SERVER_PIDS+=($!)
    wait_healthy "http://127.0.0.1:$FERRITE_PORT" "$!"
    "$LLAMA_BIN/llama-server" -m "$model" --port "$LLAMA_PORT" -t "$THREADS" -tb "$THREADS" \
        -np "$slots" --cont-batching -c "$ctx" --metrics >"$OUT/llama-server.log" 2>&1 &
    SERVER_PIDS+=($!)
    wait_healthy "http://127.0.0.1:$LLAMA_PORT" "$!"
}

# `ferrite bench` against one server; the JSON report goes to $1.
bench_server() {
    local out="$1" port="$2"
    shift 2
    timeout "$RUN_TIMEOUT" "$FERRITE" bench --url "http://127.0.0.1:$port" --no-progress \
        --max-duration $((RUN_TIMEOUT - 30)) --json --output "$out" "$@" >/dev/null \
        2>"$out.log" || log "FAILED (the report marks it missing): $out.log"
}

port_of() { if [[ "$1" == ferrite ]]; then echo "$FERRITE_PORT"; else echo "$LLAMA_PORT"; fi; }

if has_part speed; then
    IFS=, read -ra speed_models <<<"$MODELS"
    for round in $(seq 1 "$ROUNDS"); do
        for m in "${speed_models[@]}"; do
            path="$(model_path "$m")"
            # Alternate which tool goes first, so neither always runs on a warmer machine.
            order=(llamacpp ferrite)
            (( round % 2 == 0 )) && order=(ferrite llamacpp)
            (( FERRITE_INT8 )) && order+=(ferrite-int8)
            (( FERRITE_AMX )) && order+=(ferrite-amx)
            for tool in "${order[@]}"; do
                log "speed round $round/$ROUNDS: $m, $tool pp$PP tg$TG x$REPS"
                raw="$OUT/speed-$m-$tool-r$round.json"
                if [[ "$tool" == llamacpp ]]; then
                    timeout "$RUN_TIMEOUT" "$LLAMA_BIN/llama-bench" -m "$path" -t "$THREADS" \
                        -p "$PP" -n "$TG" -r "$REPS" -o json >"$raw" 2>"$raw.log" \
                        || { log "FAILED: $raw.log"; rm -f "$raw"; }
                else
                    variant=()
                    [[ "$tool" == ferrite-int8 ]] && variant=(--int8-activations)
                    [[ "$tool" == ferrite-amx ]] && variant=(--amx-bf16)
                    timeout "$RUN_TIMEOUT" "$FERRITE" bench-model "$path" --threads "$THREADS" \
                        --prompt-len "$PP" --gen-len "$TG" --repetitions "$REPS" --json "${variant[@]}" \
                        >"$raw" 2>"$raw.log" || { log "FAILED: $raw.log"; rm -f "$raw"; }
                fi
            done
        done
    done
fi

if has_part serving || has_part prefix; then
    start_servers "$(model_path "$SERVE_MODEL")"
fi

if has_part serving; then
    IFS=, read -ra concurrencies <<<"$CONCURRENCY"
    for round in $(seq 1 "$ROUNDS"); do
        for c in "${concurrencies[@]}"; do
            n=$(( c * REQUESTS_PER_SLOT > MIN_REQUESTS ? c * REQUESTS_PER_SLOT : MIN_REQUESTS ))
            order=(llamacpp ferrite)
            (( round % 2 == 0 )) && order=(ferrite llamacpp)
            # Every (round, concurrency) has its own seed: a seed sends the same prompts, and
            # a server's prefix cache would remember them from the previous run.
            for server in "${order[@]}"; do
                log "serving round $round/$ROUNDS: $server, concurrency $c, $n requests"
                bench_server "$OUT/serve-$server-c$c-r$round.json" "$(port_of "$server")" \
                    --workload random --input-len "$SERVE_IN" --output-len "$SERVE_OUT" \
                    --max-concurrency "$c" --num-requests "$n" --seed $((1000 * round + c))
            done
        done
    done
fi

if has_part prefix; then
    for round in $(seq 1 "$PREFIX_ROUNDS"); do
        for server in ferrite llamacpp; do
            port="$(port_of "$server")"
            # Seeds of their own: no earlier run sent these prompts. The cold prompts are
            # as long as the shared ones (prefix + 24 tokens) but share nothing.
            log "prefix round $round: $server, $PREFIX_REQUESTS shared-prefix requests"
            bench_server "$OUT/prefix-$server-shared-r$round.json" "$port" --workload random \
                --prefix-len "$PREFIX_LEN" --input-len 24 --output-len 8 \
                --max-concurrency 1 --num-requests "$PREFIX_REQUESTS" --seed $((500000 + round))
            log "prefix round $round: $server, $PREFIX_REQUESTS cold requests"
            bench_server "$OUT/prefix-$server-cold-r$round.json" "$port" --workload random \
                --input-len $((PREFIX_LEN + 24)) --output-len 8 \
                --max-concurrency 1 --num-requests "$PREFIX_REQUESTS" --seed $((600000 + round))
        done
    done
fi

cat >"$OUT/meta.json" <<EOF
{
  "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "cpu": "$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)",
  "cores": $(nproc),
  "memory": "$(free -g 2>/dev/null | awk '/^Mem:/ {print $2 " GiB"}')",
  "commit": "$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- crates || echo '+dirty')",
  "llama_cpp": "vendored by llama-cpp-python $(basename "$(dirname "$LLAMA_BIN")" | sed 's/^build-//')",
  "llama_bin": "$LLAMA_BIN",
  "threads": $THREADS,
  "rounds": $ROUNDS,
  "reps": $REPS,
  "serve_model": "$SERVE_MODEL",
  "serve_in": $SERVE_IN,
  "serve_out": $SERVE_OUT,
  "prefix_len": $PREFIX_LEN,
  "prefix_requests": $PREFIX_REQUESTS,
  "elapsed_s": $(( $(date +%s) - started ))
}
EOF
python3 "$ROOT/bench/summarize_cpu_vs_llamacpp.py" "$OUT" | tee "$ROOT/bench/results/$STAMP.md"
log "report: bench/results/$STAMP.md, raw runs: bench/results/$STAMP/"
