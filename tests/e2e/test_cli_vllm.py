"""vLLM's command line on `ferrite serve` (issue 41): a vLLM tool-calling recipe starts and
serves, refused flags say what ferrite does instead, and one request id runs through the
response, its headers, the log and /metrics; CORS as --allowed-origins configures it."""

import os
import re
import subprocess
import time
from pathlib import Path

import httpx
import openai
import pytest

from conftest import QWEN_FILE, ROOT, free_port, models_dir, wait_healthy

BINARY = os.environ.get("FERRITE_BIN", str(ROOT / "target/release/ferrite"))
ORIGIN = "http://app.example"
MARKER = "You are the e2e assistant."
# A Hermes-style ChatML template, as vLLM's recipes pass one: it names a system line of its own,
# so that a prompt shows whether it replaced the model's.
TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if loop.first and m.role != 'system' %}" + MARKER + "\n{% endif %}"
    "{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def start(args, log_path: Path):
    port = free_port()
    log = open(log_path, "w")
    proc = subprocess.Popen([BINARY, "serve", *args, "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(proc, url, log_path, timeout=90)
    return proc, url


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vllm")
    template = tmp / "tool_chat_template.jinja"
    template.write_text(TEMPLATE)
    model = models_dir() / QWEN_FILE
    if not model.is_file():
        pytest.fail(f"{model} is missing: run scripts/fetch_models.sh")
    log_path = tmp / "server.log"
    # The recipe's line as vLLM's docs write it, `vllm serve` replaced; then what this file
    # checks besides (CORS) and what keeps the suite small (the KV cache).
    proc, url = start([str(model), "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
                       "--chat-template", str(template), "--max-model-len", "8192",
                       "--seed", "0", "--dtype", "auto",
                       "--allowed-origins", f'["{ORIGIN}"]', "--trust-request-chat-template",
                       "--kv-cache-memory", "256MiB"],
                      log_path)
    yield url, log_path
    proc.terminate()
    proc.wait(timeout=10)
    assert "panicked" not in log_path.read_text()


def test_the_recipe_serves_with_its_template_and_seed(recipe):
    url, _ = recipe
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)
    tokens = httpx.post(url + "/tokenize", json={"messages": [{"role": "user", "content": "hi"}]},
                        timeout=60).json()["tokens"]
    prompt = httpx.post(url + "/detokenize", json={"tokens": tokens}, timeout=60).json()["prompt"]
    assert MARKER in prompt, prompt
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}]
    answer = client.chat.completions.create(
        model=client.models.list().data[0].id,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=tools, max_tokens=48)
    assert answer.choices[0].finish_reason in ("stop", "length", "tool_calls")
    # --seed 0: an unseeded sampled request is the request with seed 0.
    ask = dict(model=answer.model, prompt="Once upon a time", max_tokens=24, temperature=1.0)
    unseeded = [client.completions.create(**ask).choices[0].text for _ in range(2)]
    seeded = client.completions.create(**ask, seed=0).choices[0].text
    assert unseeded[0] == unseeded[1] == seeded


def test_a_trusted_request_brings_its_own_template_and_documents(recipe):
    url, _ = recipe
    own = ("{% for d in documents %}[{{ d.title }}: {{ d.text }}]{% endfor %}"
           "Q: {{ messages[0].content }}\nA:")
    docs = [{"title": "Tides", "text": "The moon pulls the sea."}, {"title": "Sun", "text": "Hot."}]
    ask = {"messages": [{"role": "user", "content": "Why tides?"}], "chat_template": own,
           "documents": docs}
    tokens = httpx.post(url + "/tokenize", json=ask, timeout=60).json()["tokens"]
    prompt = httpx.post(url + "/detokenize", json={"tokens": tokens}, timeout=60).json()["prompt"]
    assert prompt == "[Tides: The moon pulls the sea.][Sun: Hot.]Q: Why tides?\nA:"
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)
    model = client.models.list().data[0].id
    answer = client.chat.completions.create(
        model=model, messages=ask["messages"], max_tokens=2,
        extra_body={"chat_template": own, "documents": docs})
    assert answer.usage.prompt_tokens == len(tokens)
    # The model's own template is still every other request's.
    plain = httpx.post(url + "/tokenize", json={"messages": ask["messages"]}, timeout=60).json()
    assert plain["tokens"] != tokens
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model=model, messages=ask["messages"], max_tokens=2,
                                       extra_body={"chat_template": "{% for %}"})
    assert bad.value.body["param"] == "chat_template"
    with pytest.raises(openai.BadRequestError) as both:
        client.chat.completions.create(
            model=model, messages=ask["messages"], max_tokens=2,
            extra_body={"documents": docs, "chat_template_kwargs": {"documents": []}})
    assert both.value.body["param"] == "documents"


def test_verbosity_reaches_a_template_that_reads_it(recipe):
    url, _ = recipe
    own = "{% if verbosity %}Verbosity: {{ verbosity }}\n{% endif %}Q: {{ messages[0].content }}\nA:"
    body = {"messages": [{"role": "user", "content": "Why tides?"}], "max_tokens": 2,
            "return_token_ids": True}
    r = httpx.post(url + "/v1/chat/completions",
                   json={**body, "chat_template": own, "verbosity": "low"}, timeout=60)
    assert r.status_code == 200, r.text
    ids = r.json()["prompt_token_ids"]
    prompt = httpx.post(url + "/detokenize", json={"tokens": ids}, timeout=60).json()["prompt"]
    assert prompt == "Verbosity: low\nQ: Why tides?\nA:"
    # The server's template (the recipe's) has no `verbosity`: a 400 naming the field, on
    # chat and on Responses; an unknown level too.
    for path, extra, param in [
        ("/v1/chat/completions", {"verbosity": "low"}, "verbosity"),
        ("/v1/chat/completions", {"verbosity": "loud", "chat_template": own}, "verbosity"),
        ("/v1/responses", {"text": {"verbosity": "low"}}, "text.verbosity"),
    ]:
        ask = body if path.endswith("completions") else {"input": "Why tides?"}
        bad = httpx.post(url + path, json={**ask, **extra}, timeout=60)
        assert bad.status_code == 400 and bad.json()["error"]["param"] == param, bad.text


def test_one_request_id_in_body_headers_log_and_metrics(recipe):
    url, log_path = recipe
    body = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4}
    r = httpx.post(url + "/v1/chat/completions", json=body,
                   headers={"X-Request-Id": "e2e-req-41"}, timeout=60)
    assert r.status_code == 200
    assert r.headers["x-request-id"] == "e2e-req-41"
    assert r.json()["id"] == "chatcmpl-e2e-req-41"
    # Without a client id the server's own is echoed and ends the body's id.
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=60)
    own = r.headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", own) and r.json()["id"] == f"chatcmpl-{own}"
    bad = httpx.post(url + "/v1/chat/completions", json={**body, "model": "nope"},
                     headers={"X-Request-Id": "e2e-rejected"}, timeout=60)
    assert bad.status_code == 404 and bad.headers["x-request-id"] == "e2e-rejected"
    time.sleep(0.5)
    lines = log_path.read_text().splitlines()
    finished = [l for l in lines if "request finished" in l and "e2e-req-41" in l]
    assert len(finished) == 1, lines[-20:]
    assert any(own in l for l in lines if "request finished" in l)
    rejected = [l for l in lines if "request rejected" in l and "e2e-rejected" in l]
    assert len(rejected) == 1 and "status=404" in rejected[0] and "nope" in rejected[0], rejected
    metrics = httpx.get(url + "/metrics", timeout=10).text
    assert re.search(r'ferrite:http_requests_total\{[^}]*route="/v1/chat/completions"[^}]*'
                     r'status="404"[^}]*\} 1', metrics), metrics


def test_cors_answers_a_preflight_and_marks_responses(recipe):
    url, _ = recipe
    asked = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "authorization, content-type"}
    pre = httpx.options(url + "/v1/chat/completions", headers=asked, timeout=10)
    assert pre.status_code == 200
    assert pre.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in pre.headers["access-control-allow-methods"]
    assert pre.headers["access-control-allow-headers"] == "authorization, content-type"
    other = httpx.options(url + "/v1/chat/completions",
                          headers={**asked, "Origin": "http://evil.example"}, timeout=10)
    assert other.status_code == 400
    r = httpx.get(url + "/v1/models", headers={"Origin": ORIGIN}, timeout=10)
    assert r.headers["access-control-allow-origin"] == ORIGIN
    assert "access-control-allow-origin" not in httpx.get(url + "/v1/models", timeout=10).headers


@pytest.mark.parametrize("flags,says", [
    (["--tensor-parallel-size", "2"], "one server per GPU"),
    (["--dtype", "float16"], "computes in float32 only"),
    (["--chat-template", "no-such-file"], "neither a file nor a Jinja template"),
])
def test_flags_ferrite_cannot_honour_are_refused_with_what_it_does(flags, says):
    model = models_dir() / QWEN_FILE
    done = subprocess.run([BINARY, "serve", str(model), "--port", str(free_port()), *flags],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert says in done.stderr + done.stdout


def test_version_names_the_commit_and_the_cuda_kernels():
    out = subprocess.run([BINARY, "--version"], capture_output=True, text=True).stdout
    assert re.search(r"commit [0-9a-f]{12}", out) and "CUDA kernels" in out, out


def test_quiet_server_without_prefix_caching(tmp_path):
    """--disable-log-requests drops the per-request lines (counts stay); vLLM's
    --no-enable-prefix-caching turns the prefix cache off; --trust-remote-code is accepted."""
    from conftest import MODEL_FILE
    log_path = tmp_path / "quiet.log"
    proc, url = start([str(models_dir() / MODEL_FILE), "--disable-log-requests",
                       "--no-enable-prefix-caching", "--trust-remote-code",
                       "--max-model-len", "2048", "--kv-cache-memory", "256MiB"], log_path)
    try:
        body = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 2}
        assert httpx.post(url + "/v1/chat/completions", json=body, timeout=60).status_code == 200
        # No --trust-request-chat-template: a request's own template is refused, naming the flag.
        own = httpx.post(url + "/v1/chat/completions",
                         json={**body, "chat_template": "{{ messages[0].content }}"}, timeout=60)
        assert own.status_code == 400 and own.json()["error"]["param"] == "chat_template"
        assert "--trust-request-chat-template" in own.json()["error"]["message"]
        # The default policy is fcfs: a nonzero priority is refused, zero is fine.
        urgent = httpx.post(url + "/v1/chat/completions", json={**body, "priority": -1}, timeout=60)
        assert urgent.status_code == 400 and urgent.json()["error"]["param"] == "priority"
        assert "--scheduling-policy priority" in urgent.json()["error"]["message"]
        zero = httpx.post(url + "/v1/chat/completions", json={**body, "priority": 0}, timeout=60)
        assert zero.status_code == 200
        bad = httpx.post(url + "/v1/chat/completions", json={**body, "model": "nope"}, timeout=60)
        assert bad.status_code == 404
        metrics = httpx.get(url + "/metrics", timeout=10).text
        assert 'enable_prefix_caching="False"' in metrics
        assert re.search(r'http_requests_total\{[^}]*status="404"[^}]*\} 1', metrics)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    text = log_path.read_text()
    # Both per-request lines carry a request_id; nothing else does.
    assert "request_id=" not in text, text
    assert "--trust-remote-code has no effect" in text


def test_priority_scheduling_admits_the_most_urgent_first(tmp_path):
    """--scheduling-policy priority with one seat: of two requests waiting behind a running
    one, the lower `priority` runs first though it arrived later."""
    import threading
    from conftest import MODEL_FILE
    log_path = tmp_path / "priority.log"
    proc, url = start([str(models_dir() / MODEL_FILE), "--scheduling-policy", "priority",
                       "--max-num-seqs", "1", "--max-model-len", "2048",
                       "--kv-cache-memory", "256MiB"], log_path)
    done = {}

    def ask(name, priority, max_tokens, delay):
        time.sleep(delay)
        body = {"prompt": f"Story {name}:", "max_tokens": max_tokens, "ignore_eos": True,
                "temperature": 0, "priority": priority}
        r = httpx.post(url + "/v1/completions", json=body, timeout=120)
        assert r.status_code == 200, r.text
        done[name] = time.monotonic()

    try:
        threads = [threading.Thread(target=ask, args=a) for a in
                   [("running", 0, 96, 0.0), ("later", 5, 24, 0.3), ("urgent", -1, 24, 0.6)]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert done["running"] < done["urgent"] < done["later"], done
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert "panicked" not in log_path.read_text()
