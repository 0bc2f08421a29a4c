#!/usr/bin/env bash
# Speculative decoding on the GPU with a real model: SmolLM2-135M-Instruct Q4_1 served with
# `--device cuda`, plain / ngram / suffix, on bench/spec/edit_prompts.jsonl and
# code_prompts.jsonl at concurrency 1, one `ferrite bench --workload replay` run each (greedy,
# streaming), as bench/spec_cpu.sh does on the CPU; then the greedy answers of each speculative
# server are compared with plain decoding's, text for text.
#
# The model (98 MB) and the binary do not fit one device call's carry, so three steps:
#   here:             bash bench/gpu/spec_suffix.sh prepare     # .gpu-sfx/a (binary + part 1), .gpu-sfx/b (part 2)
#   device, call 1:   bash bench/gpu/spec_suffix.sh stage       # carry .gpu-sfx/a: copied to /root/w
#   device, call 2:   bash bench/gpu/spec_suffix.sh run         # carry .gpu-sfx/b, within 30 s of call 1
# Results go to $OUT; bench/summarize_spec.py tabulates them here.
set -euo pipefail
cd "$(dirname "$0")/../.."
W=/root/w
MODEL_NAME=SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
PORT=18461

case "${1:-}" in
prepare)
    src="${FERRITE_MODELS:-$HOME/.cache/ferrite/models}/$MODEL_NAME"
    [ -f .gpu/ferrite ] || { echo "run bench/gpu/build.sh first" >&2; exit 2; }
    rm -rf .gpu-sfx && mkdir -p .gpu-sfx/a .gpu-sfx/b
    xz -T2 -c .gpu/ferrite >.gpu-sfx/a/ferrite.xz
    split -b 50000000 "$src" .gpu-sfx/part.
    mv .gpu-sfx/part.aa .gpu-sfx/a/
    mv .gpu-sfx/part.ab .gpu-sfx/b/
    du -sh .gpu-sfx/a .gpu-sfx/b
    ;;
stage)
    mkdir -p "$W"
    xz -dc .gpu-sfx/a/ferrite.xz >"$W/ferrite" && chmod +x "$W/ferrite"
    cp .gpu-sfx/a/part.aa "$W/"
    ls -la "$W"
    ;;
run)
    OUT=${OUT:-/tmp/ferrite-gpu-out}
    mkdir -p "$OUT"
    cat "$W/part.aa" .gpu-sfx/b/part.ab >"$W/$MODEL_NAME"
    echo "$MODEL_SHA  $W/$MODEL_NAME" | sha256sum -c - || exit 1
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    server_pid=""
    stop() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null; server_pid=""; }
    trap stop EXIT
    for server in plain ngram suffix; do
        args=()
        case $server in
            ngram) args=(--speculative ngram --num-speculative-tokens 8) ;;
            suffix) args=(--speculative suffix) ;;
        esac
        "$W/ferrite" serve "$W/$MODEL_NAME" --device cuda --port $PORT "${args[@]}" \
            >"$OUT/ferrite-$server.log" 2>&1 &
        server_pid=$!
        for _ in $(seq 1 120); do
            curl -sf "localhost:$PORT/health" >/dev/null 2>&1 && break
            sleep 0.5
        done
        for workload in edit code; do
            data=bench/spec/${workload}_prompts.jsonl
            n=$(grep -c . "$data")
            out="$OUT/ferrite-$server-$workload-c1.json"
            curl -s "localhost:$PORT/metrics" >"$out.metrics-before"
            "$W/ferrite" bench --url "http://127.0.0.1:$PORT" --no-progress --endpoint chat \
                --workload replay --dataset "$data" --num-requests "$n" --max-concurrency 1 \
                --no-ignore-eos --json --output "$out" >/dev/null 2>"$out.log" ||
                echo "FAILED: $server $workload"
            curl -s "localhost:$PORT/metrics" >"$out.metrics-after"
        done
        # Greedy answers, for the text-for-text comparison.
        python3 - "localhost:$PORT" bench/spec/edit_prompts.jsonl "$OUT/answers-$server.json" <<'PY'
import json, sys, urllib.request
url, src, dst = sys.argv[1:4]
answers = []
for line in open(src):
    if not line.strip():
        continue
    body = json.loads(line)
    body.update(model="SmolLM2-135M-Instruct.Q4_1", temperature=0)
    req = urllib.request.Request(f"http://{url}/v1/chat/completions", json.dumps(body).encode(),
                                 {"content-type": "application/json"})
    answers.append(json.load(urllib.request.urlopen(req, timeout=300))["choices"][0]["message"]["content"])
json.dump(answers, open(dst, "w"))
PY
        stop
    done
    python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
plain = json.load(open(f"{out}/answers-plain.json"))
for s in ("ngram", "suffix"):
    other = json.load(open(f"{out}/answers-{s}.json"))
    same = sum(a == b for a, b in zip(plain, other))
    print(f"{s} greedy answers equal to plain: {same} of {len(plain)}")
PY
    for f in "$OUT"/ferrite-*-c1.json; do
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[1].rsplit("/",1)[1], "output tok/s", round(d["output_token_throughput"],1), "mean TPOT ms", round(d["tpot_ms"]["mean"],2))' "$f"
    done
    ;;
*)
    echo "usage: $0 prepare|stage|run" >&2
    exit 2
    ;;
esac
