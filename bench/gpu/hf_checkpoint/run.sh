#!/usr/bin/env bash
# On the H200, after bench/gpu/build.sh and export_tokenizer.py packed .gpu/ and .gpu/tok/:
#   tar -xJf .gpu-pack/gpu.tar.xz && bash bench/gpu/hf_checkpoint/run.sh
# Writes an 8B-shape bf16 safetensors checkpoint and the same weights as GGUF F16, then:
# start to serving of each (from the page cache, CUDA graphs captured; phases from the log),
# one completion through HTTP, and bench-model prefill/decode speed of both in the same run.
set -u
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/ferrite-gpu-out}; mkdir -p "$OUT"
G=.gpu; HF=/tmp/llama8b; GG=/tmp/llama8b-f16.gguf
[ -f $HF/config.json ] && [ -f $GG ] || python3 bench/gpu/hf_checkpoint/write_checkpoint.py $G/tok $HF $GG 2>&1 | tail -5
cat $HF/model-*.safetensors $GG > /dev/null   # into the page cache, as the issue's measurement asks

serve_once() {  # label, model
  local label=$1 model=$2 port=8111
  local t0; t0=$(date +%s.%N)
  $G/ferrite serve "$model" --device cuda --port $port > "$OUT/serve-$label.log" 2>&1 &
  local pid=$!
  python3 - "$port" "$t0" "$label" <<'PY'
import json, sys, time, urllib.request
port, t0, label = sys.argv[1], float(sys.argv[2]), sys.argv[3]
base = f"http://127.0.0.1:{port}"
while True:
    try:
        if urllib.request.urlopen(base + "/health", timeout=1).status == 200:
            break
    except Exception:
        if time.time() - t0 > 300:
            sys.exit(f"{label}: not serving after 300 s")
        time.sleep(0.05)
ready = time.time() - t0
req = urllib.request.Request(base + "/v1/completions", method="POST",
    data=json.dumps({"prompt": "The capital of France is", "max_tokens": 16, "temperature": 0}).encode(),
    headers={"Content-Type": "application/json"})
t1 = time.time()
body = json.loads(urllib.request.urlopen(req, timeout=60).read())
print(f"RESULT {label}: start to serving {ready:.2f} s; first completion {time.time() - t1:.3f} s, "
      f"{body['usage']['completion_tokens']} tokens, finish {body['choices'][0]['finish_reason']}")
# Structured outputs sampled on the GPU (random weights: only the grammar makes this JSON).
schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
          "count": {"type": "integer"}, "ok": {"type": "boolean"}},
          "required": ["name", "count", "ok"], "additionalProperties": False}
for temperature in (0, 1.0):
    req = urllib.request.Request(base + "/v1/chat/completions", method="POST",
        data=json.dumps({"messages": [{"role": "user", "content": "A record, please."}],
                         "max_tokens": 200, "temperature": temperature, "seed": 3, "n": 4,
                         "response_format": {"type": "json_schema",
                                             "json_schema": {"name": "r", "schema": schema}}}).encode(),
        headers={"Content-Type": "application/json"})
    out = json.loads(urllib.request.urlopen(req, timeout=120).read())
    verdicts = []
    for c in out["choices"]:
        try:
            v = json.loads(c["message"]["content"])
            good = set(v) == {"name", "count", "ok"} and isinstance(v["count"], int) \
                and isinstance(v["ok"], bool) and isinstance(v["name"], str) and len(v["name"]) <= 10
        except Exception:
            good = False
        verdicts.append(good)
    print(f"RESULT {label}: json_schema on the GPU, T={temperature}: {sum(verdicts)}/{len(verdicts)} valid "
          f"(finish {[c['finish_reason'] for c in out['choices']]}); first: {out['choices'][0]['message']['content']!r}")
PY
  kill $pid; wait $pid 2>/dev/null
  grep -E "loaded|captured|listening|seconds" "$OUT/serve-$label.log" | sed 's/\x1b\[[0-9;]*m//g' | tail -8
}
echo "== start to serving"
serve_once safetensors $HF
serve_once gguf-f16 $GG
echo "== bench-model (prefill 2048, decode 128, batch 64 x (512, 128))"
for m in $HF $GG; do
  timeout 240 $G/ferrite bench-model "$m" --device cuda --prompt-len 2048 --gen-len 128 --repetitions 3 2>&1 | tail -6
  timeout 240 $G/ferrite bench-model "$m" --device cuda --prompt-len 512 --gen-len 128 --batch 64 --repetitions 2 --no-warmup 2>&1 | tail -3
done
