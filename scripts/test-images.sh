#!/usr/bin/env bash
# CI's image test (.ci/run calls it after scripts/test.sh): builds the CPU and CUDA images with
# scripts/build-images.sh and smoke-tests the CPU one as a container on a published loopback
# port: the health check, /health and /ready, a chat completion with the default model, a
# metrics scrape, then the SIGTERM drain (/ready and new requests 503, the running request
# aborted at --shutdown-timeout, exit status 0). The CUDA image is built, not run: no GPU here.
#
# The images get the release binary scripts/test.sh has just built (--binary) rather than
# compiling it again inside them: the same source and flags (nvcc kernels built in, so it
# serves the CUDA image too), and about two minutes of image building on a bare machine instead
# of two more release builds (374 s and 456 s measured on 2 cores). Dockerfile.cpu/.cuda still
# compile from source when no binary is given (scripts/build-images.sh without --binary).
#
# Usage: scripts/test-images.sh [path/to/ferrite]   (default ${CARGO_TARGET_DIR:-target}/release/ferrite)
# The default model must be in $FERRITE_MODELS (scripts/fetch_models.sh smollm2); it is mounted
# read-only as the image's /models.
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${1:-${CARGO_TARGET_DIR:-target}/release/ferrite}
models=${FERRITE_MODELS:-$HOME/.cache/ferrite/models}
image=localhost/ferrite:cpu
name=ferrite-image-test-$$
default_model=SmolLM2-135M-Instruct.Q4_1
shutdown_timeout=3

fail() { echo "test-images: FAIL: $*" >&2; exit 1; }
ok() { echo "    ok: $*"; }
started=$(date +%s)

[ -x "$binary" ] || fail "no ferrite binary at $binary (build it first: cargo build --release -p ferrite)"
[ -f "$models/$default_model.gguf" ] \
  || fail "the default model is not in $models (scripts/fetch_models.sh smollm2)"
command -v curl >/dev/null || { apt-get update -qq && apt-get install -y -qq curl >/dev/null; }

echo "== images (scripts/build-images.sh --binary $binary)"
scripts/build-images.sh --binary "$binary"
build_s=$(( $(date +%s) - started ))

echo "== image metadata"
commit=$("$binary" --version | sed -n 's/.*(commit \([^;)]*\).*/\1/p')
for flavour in cpu cuda; do
  meta=$(podman image inspect --format \
    '{{.Config.User}}|{{index .Config.Labels "org.opencontainers.image.revision"}}|{{.Config.Entrypoint}}|{{if .Config.Healthcheck}}{{.Config.Healthcheck.Test}}{{end}}' \
    "localhost/ferrite:$flavour")
  IFS='|' read -r user revision entrypoint healthcheck <<<"$meta"
  [ "$user" = 10001:10001 ] || fail "$flavour image runs as '$user', not 10001:10001"
  [ "$revision" = "$commit" ] || fail "$flavour image's revision label is '$revision', not $commit"
  [[ $entrypoint == *"ferrite serve"* ]] || fail "$flavour image's entrypoint is $entrypoint"
  [[ $healthcheck == *ferrite-healthcheck* ]] || fail "$flavour image has no health check ($healthcheck)"
  podman image exists "localhost/ferrite:$flavour-$commit" || fail "no tag localhost/ferrite:$flavour-$commit"
  ok "localhost/ferrite:$flavour: user $user, revision $revision, health check, entrypoint"
done
# The manifests must name an image this script makes (docs/deploy.md says how to push it).
for ref in $(sed -n 's/^ *image: *//p' deploy/kubernetes/*.yaml); do
  podman image exists "$ref" || fail "deploy/kubernetes names the image $ref, which build-images.sh did not make"
  ok "deploy/kubernetes's image $ref was built"
done

echo "== run the CPU image ($image) on a loopback port"
logs() { echo "--- container logs ($name)"; podman logs "$name" 2>&1 | grep -v 'systemd' | tail -40 || true; }
cleanup() {
  local rc=$?
  [ $rc -ne 0 ] && logs
  podman rm -f "$name" >/dev/null 2>&1 || true
  [ -n "${stream_pid:-}" ] && kill "$stream_pid" 2>/dev/null || true
  rm -f "${stream:-}"
  exit $rc
}
trap cleanup EXIT
# 127.0.0.1:: publishes on a free loopback port (the machine may be shared); the model directory
# read-only; --metrics-names vllm as the Kubernetes manifest runs it. Podman's complaints that it
# cannot schedule the health check without systemd are filtered: the check is run by hand below.
podman run -d --name "$name" -p 127.0.0.1::8000 -v "$models:/models:ro" "$image" \
  --metrics-names vllm --shutdown-timeout "$shutdown_timeout" 2> >(grep -v systemd >&2) >/dev/null
port=$(podman port "$name" 8000/tcp | sed 's/.*://')
[ -n "$port" ] || fail "podman published no port for 8000"
url=http://127.0.0.1:$port
echo "    listening on $url"

for ((i = 0; ; i++)); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "$url/health" || true)
  [ "$code" = 200 ] && break
  [ "$(podman inspect --format '{{.State.Running}}' "$name")" = true ] || fail "the container exited while loading"
  [ $i -lt 240 ] || fail "/health still answers '$code' after 120 s"
  sleep 0.5
done
ok "/health 200 after $((i / 2)) s"
podman healthcheck run "$name" >/dev/null 2>&1 || fail "the image's health check fails on a serving container"
[ "$(podman inspect --format '{{.State.Health.Status}}' "$name")" = healthy ] || fail "podman does not report the container healthy"
ok "health check: healthy"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$url/ready")" = 200 ] || fail "/ready is not 200 while serving"
ok "/ready 200"

# The default model (no MODEL argument), greedy: SmolLM2 answers this one with Paris.
answer=$(curl -sS --fail-with-body -m 60 "$url/v1/chat/completions" -H 'content-type: application/json' \
  -d "{\"model\": \"$default_model\", \"messages\": [{\"role\": \"user\", \"content\": \"What is the capital of France?\"}], \"max_tokens\": 24, \"temperature\": 0}") \
  || fail "chat completion: $answer"
content=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["choices"][0]["message"]["content"])' "$answer") \
  || fail "chat completion answer is not an OpenAI completion: $answer"
[[ $content == *Paris* ]] || fail "chat completion: expected Paris in '$content'"
ok "chat completion with the default model: '${content//$'\n'/ }'"

metrics=$(curl -sS --fail "$url/metrics") || fail "GET /metrics failed"
for series in 'vllm:num_requests_running{' 'vllm:num_requests_waiting{' 'vllm:kv_cache_usage_perc{' 'vllm:cache_config_info{' \
              'ferrite:http_requests_total{'; do
  grep -qF "$series" <<<"$metrics" || fail "/metrics has no $series"
done
grep -E '^vllm:request_success_total\{.*finished_reason="(stop|length)".*\} 1(\.0)?$' <<<"$metrics" >/dev/null \
  || fail "/metrics does not count the one finished request: $(grep request_success_total <<<"$metrics")"
ok "/metrics: vLLM's names, the finished request counted"

echo "== SIGTERM drain (--shutdown-timeout $shutdown_timeout)"
# A request that outlasts the timeout (8,000 tokens, EOS ignored), streamed, running when the
# signal comes: it must end with finish_reason "abort", the process with status 0.
stream=$(mktemp)
curl -sN -m 120 "$url/v1/completions" -H 'content-type: application/json' \
  -d "{\"model\": \"$default_model\", \"prompt\": \"Once upon a time\", \"max_tokens\": 8000, \"ignore_eos\": true, \"temperature\": 0, \"stream\": true}" \
  >"$stream" &
stream_pid=$!
for ((i = 0; i < 100; i++)); do grep -q '^data: ' "$stream" && break; sleep 0.2; done
grep -q '^data: ' "$stream" || fail "the streamed request sent nothing in 20 s"
signalled=$(date +%s.%N)
podman kill --signal TERM "$name" >/dev/null
sleep 0.5
[ "$(curl -s -o /dev/null -w '%{http_code}' "$url/ready")" = 503 ] || fail "/ready is not 503 while draining"
ok "/ready 503 while draining"
code=$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/completions" -H 'content-type: application/json' \
  -d "{\"model\": \"$default_model\", \"prompt\": \"Hi\", \"max_tokens\": 2}")
[ "$code" = 503 ] || fail "a new request got $code while draining, not 503"
ok "new request 503 while draining"
status=$(timeout $((shutdown_timeout + 20)) podman wait "$name") || fail "the container did not stop within $((shutdown_timeout + 20)) s of SIGTERM"
took=$(python3 -c "import time; print(f'{time.time() - $signalled:.1f}')")
[ "$status" = 0 ] || fail "exit status $status after SIGTERM, not 0"
wait "$stream_pid" || fail "the streamed request failed (curl exit $?)"
stream_pid=
grep -q '"finish_reason":"abort"' "$stream" || fail "the running request did not end with finish_reason abort: $(tail -c 300 "$stream")"
grep -q '^data: \[DONE\]' "$stream" || fail "the aborted stream did not end with [DONE]"
# (The log is read whole first: grep -q stopping early would fail the pipe under pipefail.)
log=$(podman logs "$name" 2>&1)
grep -q 'shutdown timeout: aborting the requests still running' <<<"$log" \
  || fail "the log does not report the drain's timeout"
ok "exit status 0, $took s after SIGTERM; the running request aborted, its stream ended with [DONE]"

echo "== images ok: built in $build_s s, tested in $(( $(date +%s) - started - build_s )) s"
