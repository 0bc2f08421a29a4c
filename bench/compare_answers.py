#!/usr/bin/env python3
"""Two ferrite binaries answer the same representative requests; their JSON is compared with
ids and times left out. For a change that must not alter what clients see (a refactor), or
whose only intended difference should show up here and nowhere else.

Usage: bench/compare_answers.py OLD_BIN NEW_BIN [MODEL.gguf]
  (default model: SmolLM2-135M-Instruct Q4_1 in $FERRITE_MODELS or ~/.cache/ferrite/models;
  run with tests/e2e/.venv-e2e/bin/python, which has httpx)
Prints one line per request (same / DIFFERENT, with the first differing path) and exits 1
when any differs."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

MODEL_NAME = "m"
# Keys whose values differ from run to run by design.
VOLATILE = {"id", "created", "created_at", "completed_at", "response_id", "item_id",
            "call_id", "system_fingerprint", "_request_id"}

CHAT = [{"role": "user", "content": "What is the capital of France?"}]
GREEDY = {"temperature": 0}
WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]

# (name, path, body); a body with "stream": true is read as server-sent events.
REQUESTS = [
    ("chat", "/v1/chat/completions", {"messages": CHAT, "max_tokens": 16, **GREEDY}),
    ("chat system", "/v1/chat/completions", {"messages": [{"role": "system", "content": "Be brief."}] + CHAT,
                                            "max_tokens": 16, **GREEDY}),
    ("chat n=2", "/v1/chat/completions", {"messages": CHAT, "max_tokens": 8, "n": 2, **GREEDY}),
    ("chat logprobs", "/v1/chat/completions", {"messages": CHAT, "max_tokens": 6, "logprobs": True,
                                               "top_logprobs": 3, **GREEDY}),
    ("chat streamed", "/v1/chat/completions", {"messages": CHAT, "max_tokens": 12, "stream": True, **GREEDY}),
    ("chat streamed usage", "/v1/chat/completions", {"messages": CHAT, "max_tokens": 12, "stream": True,
                                                     "stream_options": {"include_usage": True}, **GREEDY}),
    ("chat stop", "/v1/chat/completions", {"messages": CHAT, "max_tokens": 16, "stop": ["Paris"], **GREEDY}),
    ("chat json_object", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Give me a JSON object about Paris."}],
                                                  "max_tokens": 24, "response_format": {"type": "json_object"}, **GREEDY}),
    ("chat json_schema", "/v1/chat/completions", {"messages": CHAT, "max_tokens": 24, **GREEDY,
                                                  "response_format": {"type": "json_schema", "json_schema": {"name": "city", "schema": {
                                                      "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}}),
    ("chat regex", "/v1/chat/completions", {"messages": CHAT, "max_tokens": 12, **GREEDY,
                                            "structured_outputs": {"regex": "[A-Z][a-z]+"}}),
    ("chat tools", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Weather in Paris?"}],
                                            "tools": WEATHER, "max_tokens": 24, **GREEDY}),
    ("completions", "/v1/completions", {"prompt": "The capital of France is", "max_tokens": 8, **GREEDY}),
    ("completions echo logprobs", "/v1/completions", {"prompt": "The capital of France is", "max_tokens": 4,
                                                      "echo": True, "logprobs": 2, **GREEDY}),
    ("completions streamed", "/v1/completions", {"prompt": "Count: one, two,", "max_tokens": 8, "stream": True, **GREEDY}),
    ("completions ids", "/v1/completions", {"prompt": [1, 504, 3458], "max_tokens": 6, **GREEDY}),
    ("responses", "/v1/responses", {"input": "What is the capital of France?", "max_output_tokens": 16, **GREEDY}),
    ("responses streamed", "/v1/responses", {"input": "What is the capital of France?", "max_output_tokens": 12,
                                             "stream": True, **GREEDY}),
    ("messages", "/v1/messages", {"messages": CHAT, "max_tokens": 16, **GREEDY}),
    ("messages streamed", "/v1/messages", {"messages": CHAT, "max_tokens": 12, "stream": True, **GREEDY}),
    ("messages stop_sequences", "/v1/messages", {"messages": CHAT, "max_tokens": 16, "stop_sequences": ["Paris"], **GREEDY}),
    ("bad field", "/v1/chat/completions", {"messages": CHAT, "max_tokens": 4, "best_of": 2}),
    ("tokenize", "/tokenize", {"prompt": "Hello there"}),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(binary: str, model: Path):
    port = free_port()
    proc = subprocess.Popen([binary, "serve", str(model), "--port", str(port), "--served-model-name",
                             MODEL_NAME, "--max-model-len", "2048", "--kv-cache-memory", "256MiB"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    sys.exit(f"{binary} did not come up")


def scrub(value):
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def ask(url: str, path: str, body: dict):
    body = {"model": MODEL_NAME, **body}
    r = httpx.post(url + path, json=body, timeout=120)
    if not body.get("stream"):
        return {"status": r.status_code, "body": scrub(r.json())}
    events = []
    for line in r.text.splitlines():
        if line.startswith("event:"):
            events.append({"event": line[6:].strip()})
        elif line.startswith("data:"):
            data = line[5:].strip()
            events.append(data if data == "[DONE]" else scrub(json.loads(data)))
    return {"status": r.status_code, "events": events}


def first_difference(a, b, path="$"):
    if type(a) is not type(b):
        return f"{path}: {json.dumps(a)[:80]} vs {json.dumps(b)[:80]}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}: only in {'new' if k in b else 'old'} ({json.dumps(a.get(k, b.get(k)))[:60]})"
            d = first_difference(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} vs {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {json.dumps(a)[:80]} vs {json.dumps(b)[:80]}"


def main():
    old_bin, new_bin = sys.argv[1], sys.argv[2]
    models = Path(os.environ.get("FERRITE_MODELS", Path.home() / ".cache/ferrite/models"))
    model = Path(sys.argv[3]) if len(sys.argv) > 3 else models / "SmolLM2-135M-Instruct.Q4_1.gguf"
    answers = {}
    for label, binary in (("old", old_bin), ("new", new_bin)):
        proc, url = start(binary, model)
        try:
            answers[label] = [ask(url, path, body) for _, path, body in REQUESTS]
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    differing = 0
    for (name, _, _), a, b in zip(REQUESTS, answers["old"], answers["new"]):
        d = first_difference(a, b)
        differing += d is not None
        print(f"{name:28} {b['status']} {'same' if d is None else 'DIFFERENT ' + d}")
    print(f"{len(REQUESTS) - differing} same, {differing} different")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
