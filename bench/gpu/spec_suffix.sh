#!/usr/bin/env bash
# Speculative decoding on the GPU with a real model: SmolLM2-135M-Instruct Q4_1 served with
# `--device cuda`, plain / ngram / suffix, on bench/spec/edit_prompts.jsonl and
# code_prompts.jsonl at concurrency 1, one `ferrite bench --workload replay` run each (greedy,
# streaming), as bench/spec_cpu.sh does on the CPU; then the greedy answers of each speculative
# server are compared with plain decoding's, text for text.
#
# The model (98 MB) and the binary do not fit one device call's carry (64 MiB, the repository's
# ~13 MB included), so they travel in three calls, each within 30 s of the last:
#   here:             bash bench/gpu/spec_suffix.sh prepare     # .gpu-sfx/1, 2, 3
#   device, call 1:   bash bench/gpu/spec_suffix.sh stage 1     # carry .gpu-sfx/1: copied to /root/w
#   device, call 2:   bash bench/gpu/spec_suffix.sh stage 2     # carry .gpu-sfx/2
#   device, call 3:   bash bench/gpu/spec_suffix.sh stage 3 && bash bench/gpu/spec_suffix.sh run
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
    rm -rf .gpu-sfx && mkdir -p .gpu-sfx/1 .gpu-sfx/2 .gpu-sfx/3
    split -b 44000000 "$src" .gpu-sfx/part.
    mv .gpu-sfx/part.aa .gpu-sfx/1/
    mv .gpu-sfx/part.ab .gpu-sfx/2/
    mv .gpu-sfx/part.ac .gpu-sfx/3/
    xz -T2 -c .gpu/ferrite >.gpu-sfx/3/ferrite.xz
    du -sh .gpu-sfx/*
    ;;
stage)
    mkdir -p "$W"
    cp .gpu-sfx/"$2"/* "$W/"
    ls -la "$W"
    ;;
run)
    OUT=${OUT:-/tmp/ferrite-gpu-out}
    mkdir -p "$OUT"
    xz -dc "$W/ferrite.xz" >"$W/ferrite" && chmod +x "$W/ferrite"
    cat "$W"/part.a? >"$W/$MODEL_NAME"
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
    python3 bench/summarize_spec.py "$OUT" "SmolLM2-135M-Instruct Q4_1 on the H200 (--device cuda), greedy." | tee "$OUT/summary.md"
    # One file back instead of many (a device call returns a limited number of files).
    tar -czf /tmp/spec-results.tgz -C "$OUT" . && mv /tmp/spec-results.tgz "$OUT/results.tgz" &&
        find "$OUT" -type f ! -name results.tgz ! -name summary.md -delete
    ;;
*)
    echo "usage: $0 prepare | stage 1|2|3 | run" >&2
    exit 2
    ;;
esac
