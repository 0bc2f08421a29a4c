#!/usr/bin/env bash
# Runs on the H200 from the repository root, with .gpu/ made by bench/gpu/build.sh carried
# along: nvidia-smi, the kernel tests, the CPU/CUDA parity tests, then the benchmarks, each
# under its own time limit, and a table at the end. Full logs go to $OUT (at most 8 files).
# One failure never stops the rest.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ferrite-gpu-out}
mkdir -p "$OUT"
G=.gpu
declare -a ROWS
row() { ROWS+=("$1"); }

echo "== nvidia-smi"; timeout 20 nvidia-smi 2>&1 | head -20
echo "== kernels: ptxas (registers / spills)"; grep -E "Compiling entry|Used|spill" $G/ptxas.txt | paste - - - | awk '{print $6, $(NF-0)}' | head -40 || true

run_tests() {  # name, limit
  local name=$1 limit=$2
  echo "== test $name"
  timeout "$limit" "$G/tests/$name" --test-threads=1 --nocapture >"$OUT/test-$name.log" 2>&1
  local rc=$?
  grep -E "relative error|parity|fixture|switch|bitwise|SKIPPED|panicked|test result|FAILED|^test " "$OUT/test-$name.log" | tail -60
  row "test $name | rc=$rc | $(grep -E '^test result' "$OUT/test-$name.log" | tail -1)"
}
PHASE=${1:-all}   # tests | bench | all (tests + bench) | spec | moe (moe-tests + moe-bench) | only NAME...
if [ "$PHASE" = only ]; then   # the named test executables of .gpu/tests, 300 s each
  shift
  for name in "$@"; do run_tests "$name" 300; done
fi
if [ "$PHASE" = tests ] || [ "$PHASE" = all ]; then
run_tests ferrite_cuda 30
run_tests kernels 90
run_tests sampling 90
run_tests attention 90
run_tests parity 300
run_tests moe 300
run_tests fixture_parity 120
run_tests mtp 120
fi

bench() {  # label, limit, args...
  local label=$1 limit=$2; shift 2
  echo "== bench $label: offline_bench $*"
  local before; before=$(wc -l <"$OUT/bench.log" 2>/dev/null || echo 0)
  timeout "$limit" env ${BENCH_ENV:-} $G/offline_bench "$@" >>"$OUT/bench.log" 2>&1
  local rc=$?
  # One request also reports the warm prefill on a second RESULT line: keep both.
  local line; line=$(tail -n +"$((before + 1))" "$OUT/bench.log" | grep RESULT | sed 's/^RESULT //' | paste -sd' ')
  line="RESULT $line"
  grep -E "captured|warmed|loaded|KV pool|ERROR|Error|panicked" "$OUT/bench.log" | tail -5
  echo "$line"
  row "$label | rc=$rc | ${line#RESULT }"
}
if [ "$PHASE" = bench ] || [ "$PHASE" = all ]; then
bench "1.5B batch-1 decode (graphs)" 90 qwen2.5-1.5b 1 128 512
BENCH_ENV=FERRITE_PDL=0 bench "1.5B batch-1 decode (graphs, no PDL)" 90 qwen2.5-1.5b 1 128 512
bench "8B batch-1 decode (graphs)" 120 llama-3.1-8b 1 128 256
bench "1.5B prefill 4096" 60 qwen2.5-1.5b 1 4096 1
bench "8B prefill 4096" 90 llama-3.1-8b 1 4096 1
bench "1.5B 256x(512,128)" 120 qwen2.5-1.5b 256 512 128
bench "8B 256x(512,128)" 150 llama-3.1-8b 256 512 128

echo "== start to serving: ferrite serve --device cuda --load-format dummy --model llama-3.1-8b"
start=$(date +%s%N)
timeout 90 $G/ferrite serve --device cuda --load-format dummy --model llama-3.1-8b --port 8011 >"$OUT/serve.log" 2>&1 &
pid=$!
ready=""
for _ in $(seq 1 600); do
  if curl -sf localhost:8011/health >/dev/null 2>&1; then ready=$(( ($(date +%s%N) - start) / 1000000 ))ms; break; fi
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
chat=$(curl -s -m 20 localhost:8011/v1/chat/completions -H 'content-type: application/json' \
  -d '{"model":"llama-3.1-8b","messages":[{"role":"user","content":"hello"}],"max_tokens":16,"temperature":0.7,"top_p":0.9}' | head -c 300)
echo "chat: $chat"
curl -s -m 5 localhost:8011/metrics | grep -E "^ferrite:(generation_tokens_total|prompt_tokens_total)" | head -4
kill $pid 2>/dev/null; wait $pid 2>/dev/null
grep -E "captured|loaded|KV pool|serving" "$OUT/serve.log" | tail -5
row "8B start->serving | ready_s=${ready:-never} | chat=$(echo "$chat" | grep -c choices)"
fi

if [ "$PHASE" = bench ] || [ "$PHASE" = all ]; then
echo "== speculative decoding on the GPU: greedy token ids with and without it (dummy 1.5B, draft dummy 0.5B)"
spec_run() {  # label, flags...
  local label=$1; shift
  timeout 90 $G/ferrite generate qwen2.5-1.5b --device cuda --load-format dummy --max-tokens 64 --token-ids \
    --prompt "def add(a, b): return a + b. def add(a, b): return a + b. def add(a, b):" "$@" \
    >"/tmp/spec-$label.txt" 2>>"$OUT/spec.log"
  local rc=$?
  echo $rc >"/tmp/spec-$label.rc"
  echo "rc=$rc $label: $(grep -E 'tok/s' "$OUT/spec.log" | tail -1)"
}
spec_run plain
spec_run ngram --speculative ngram --speculative-fixed-k --num-speculative-tokens 4
spec_run draft --speculative draft --draft-model qwen2.5-0.5b --speculative-fixed-k --num-speculative-tokens 4
for label in ngram draft; do
  same=$(python3 -c "a=open('/tmp/spec-plain.txt').read().split(); b=open('/tmp/spec-$label.txt').read().split(); n=next((i for i,(x,y) in enumerate(zip(a,b)) if x!=y), min(len(a),len(b))); print(f'{n} of {len(a)} token ids equal, {len(b)} generated')")
  echo "spec $label vs plain: $same"
  row "spec $label greedy tokens vs plain | rc=$(cat /tmp/spec-$label.rc) | $same"
done
fi

if [ "$PHASE" = spec ]; then
# Speculation with a controlled acceptance rate (offline_bench's FERRITE_BENCH_SPEC): a draft with
# the target's own random weights (every draft accepted), one with other weights (almost none),
# and suffix decoding on random prompts (nothing to copy), each against plain decoding at the
# same batch size; the adaptive policy must keep each at >= 0.95x plain.
for n in 1 16 64 256; do
  out=128; [ "$n" = 1 ] && out=256
  bench "1.5B ${n}x(128,$out) plain" 120 qwen2.5-1.5b $n 128 $out
  for spec in self other suffix; do
    BENCH_ENV="FERRITE_BENCH_SPEC=$spec" bench "1.5B ${n}x(128,$out) spec=$spec" 120 qwen2.5-1.5b $n 128 $out
  done
done
fi

if [ "$PHASE" = moe ] || [ "$PHASE" = moe-tests ]; then
# Issue 13 on the GPU: the MoE kernel and CPU/CUDA parity tests (random-weight models and the
# transformers-made fixtures), then Qwen3-30B-A3B's shape (random bf16 weights drawn on the
# device, bench/gpu/moe/) against the dense model with the same active parameters: batch-1
# decode (6.08 GB a token: bench/gpu/moe/README.md), 64 concurrent requests, a 4,096-token
# prefill.
run_tests moe 300
run_tests fixture_parity 120
fi
if [ "$PHASE" = moe ] || [ "$PHASE" = moe-bench ]; then
M=bench/gpu/moe
bench "Qwen3-30B-A3B batch-1 decode" 240 $M/qwen3-30b-a3b.json 1 128 256
bench "dense twin batch-1 decode" 180 $M/qwen3-30b-a3b-dense.json 1 128 256
bench "Qwen3-30B-A3B 64x(512,128)" 240 $M/qwen3-30b-a3b.json 64 512 128
bench "dense twin 64x(512,128)" 180 $M/qwen3-30b-a3b-dense.json 64 512 128
bench "Qwen3-30B-A3B prefill 4096" 180 $M/qwen3-30b-a3b.json 1 4096 1
fi

echo; echo "================ SUMMARY $(date -u +%F) ================"
printf '%s\n' "${ROWS[@]}"
