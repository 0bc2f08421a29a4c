"""/metrics and the per-request log against a scripted run: every counter and histogram count
must equal what the script sent, on servers of their own (so no other test's traffic counts)."""

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import pytest

from conftest import MODEL_NAME, ROOT, Server

DASHBOARD = ROOT / "docs/grafana/ferrite-dashboard.json"
MAX_TOKENS = 6
PROMPTS = [
    "The lighthouse keeper counted the ships",
    "A recipe for bread needs flour, water and",
    "Rust's borrow checker",
    "Seven bridges crossed the river at",
    "Once upon a time",
]
# Engine requests per choice: the completion with n=2 below counts twice.
N_CHOICES_LAST = 2

# The list: vLLM's series (name without prefix, type), and ferrite's own.
VLLM_SERIES = {
    "num_requests_running": "gauge", "num_requests_waiting": "gauge",
    "kv_cache_usage_perc": "gauge", "cache_config_info": "gauge",
    "prompt_tokens_total": "counter", "generation_tokens_total": "counter",
    "prefix_cache_queries_total": "counter", "prefix_cache_hits_total": "counter",
    "num_preemptions_total": "counter", "request_success_total": "counter",
    "time_to_first_token_seconds": "histogram", "inter_token_latency_seconds": "histogram",
    "e2e_request_latency_seconds": "histogram", "request_queue_time_seconds": "histogram",
    "request_prefill_time_seconds": "histogram", "request_decode_time_seconds": "histogram",
    "request_inference_time_seconds": "histogram",
    "request_prompt_tokens": "histogram", "request_generation_tokens": "histogram",
    "iteration_tokens_total": "histogram",
}
FERRITE_ONLY = {"ferrite:scheduler_step_seconds": "histogram", "ferrite:scale_out_needed": "gauge",
                "ferrite:http_requests_total": "counter"}
# Under vLLM's names only: what endpoint pickers built against older vLLM read.
VLLM_COMPATIBILITY = {"vllm:gpu_cache_usage_perc": "gauge", "vllm:lora_requests_info": "gauge"}
HISTOGRAMS = [n for n, t in VLLM_SERIES.items() if t == "histogram"]

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class Scrape:
    """One /metrics response: TYPE lines and samples."""

    def __init__(self, text: str):
        self.text = text
        self.types = {}
        self.samples = []
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                name, kind = line[len("# TYPE "):].split(" ")
                self.types[name] = kind
            elif line and not line.startswith("#"):
                m = SAMPLE.match(line)
                assert m, f"not a sample line: {line!r}"
                labels = dict(LABEL.findall(m.group(2) or ""))
                self.samples.append((m.group(1), labels, float(m.group(3))))

    def get(self, name: str, **labels) -> float:
        found = [value for n, ls, value in self.samples
                 if n == name and all(ls.get(k) == str(want) for k, want in labels.items())]
        assert len(found) == 1, f"{name} {labels}: {len(found)} samples\n{self.text}"
        return found[0]


def scrape(url: str) -> Scrape:
    r = httpx.get(url + "/metrics", timeout=30)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    return Scrape(r.text)


def wait_for_finished(url: str, prefix: str, count: int) -> Scrape:
    """The scrape once `count` requests finished and none runs or waits: the detokenizer
    records a finish just after the client got its last delta."""
    deadline = time.time() + 10
    while True:
        s = scrape(url)
        done = (s.get(prefix + "e2e_request_latency_seconds_count") >= count
                and s.get(prefix + "num_requests_running") == 0
                and s.get(prefix + "num_requests_waiting") == 0)
        if done or time.time() > deadline:
            return s
        time.sleep(0.05)


def finished_lines(server: Server, json_format: bool):
    lines = [l for l in server.log_text().splitlines() if "request finished" in l]
    return [json.loads(l) for l in lines] if json_format else lines


@pytest.fixture(scope="module")
def plain_server(tmp_path_factory):
    s = Server(["--no-prefix-caching", "--log-format", "json", "--log-token-ids"],
               tmp_path_factory.mktemp("metrics"), "metrics")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def scripted_run(plain_server):
    """K completions with ignore_eos and a known max_tokens, the last with n=2."""
    client = openai.OpenAI(base_url=plain_server.url + "/v1", api_key="none", max_retries=0, timeout=120)

    def complete(i_prompt):
        i, prompt = i_prompt
        n = N_CHOICES_LAST if i == len(PROMPTS) - 1 else 1
        r = client.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=MAX_TOKENS, n=n,
                                      temperature=0.7, seed=i, extra_body={"ignore_eos": True})
        assert [c.finish_reason for c in r.choices] == ["length"] * n
        assert r.usage.completion_tokens == n * MAX_TOKENS
        return [r.usage.prompt_tokens] * n

    with ThreadPoolExecutor(3) as pool:
        prompt_tokens = [p for ps in pool.map(complete, enumerate(PROMPTS)) for p in ps]
    return prompt_tokens, wait_for_finished(plain_server.url, "ferrite:", len(prompt_tokens))


def test_counters_and_histogram_counts_match_the_scripted_run(scripted_run):
    prompt_tokens, s = scripted_run
    k = len(prompt_tokens)
    assert k == len(PROMPTS) - 1 + N_CHOICES_LAST
    p = "ferrite:"
    assert s.get(p + "num_preemptions_total") == 0  # so the step arithmetic below is exact
    assert s.get(p + "prompt_tokens_total") == sum(prompt_tokens)
    assert s.get(p + "generation_tokens_total") == k * MAX_TOKENS
    assert s.get(p + "request_success_total", finished_reason="length") == k
    assert s.get(p + "request_success_total", finished_reason="stop") == 0
    assert s.get(p + "request_success_total", finished_reason="abort") == 0
    assert s.get(p + "prefix_cache_queries_total") == sum(prompt_tokens)
    assert s.get(p + "prefix_cache_hits_total") == 0
    for name in ["e2e_request_latency_seconds", "request_queue_time_seconds",
                 "request_prefill_time_seconds", "request_decode_time_seconds",
                 "request_prompt_tokens", "request_generation_tokens", "time_to_first_token_seconds"]:
        assert s.get(f"{p}{name}_count") == k, name
    assert s.get(p + "inter_token_latency_seconds_count") == k * (MAX_TOKENS - 1)
    assert s.get(p + "request_prompt_tokens_sum") == sum(prompt_tokens)
    assert s.get(p + "request_generation_tokens_sum") == k * MAX_TOKENS
    # Without prefix caching or preemption the steps computed every prompt token once and
    # every sampled token but the last of each request.
    assert s.get(p + "iteration_tokens_total_sum") == sum(prompt_tokens) + k * (MAX_TOKENS - 1)
    steps = s.get(p + "iteration_tokens_total_count")
    assert steps >= 1 + MAX_TOKENS - 1
    for phase in ["schedule", "forward", "sample"]:
        assert s.get("ferrite:scheduler_step_seconds_count", phase=phase) == steps
        assert s.get("ferrite:scheduler_step_seconds_sum", phase=phase) > 0


def test_latency_sums_are_consistent(scripted_run):
    _, s = scripted_run
    total = lambda name: s.get(f"ferrite:{name}_sum")
    ttft, e2e = total("time_to_first_token_seconds"), total("e2e_request_latency_seconds")
    assert 0 < ttft <= e2e
    # A request that ran to its length limit: e2e = queue + prefill + decode, TTFT = queue + prefill.
    phases = total("request_queue_time_seconds") + total("request_prefill_time_seconds")
    assert phases == pytest.approx(ttft, abs=1e-6)
    assert phases + total("request_decode_time_seconds") == pytest.approx(e2e, abs=1e-6)
    assert total("inter_token_latency_seconds") == pytest.approx(total("request_decode_time_seconds"), abs=1e-6)
    assert s.get("ferrite:scheduler_step_seconds_sum", phase="forward") <= e2e


def test_histogram_buckets_are_cumulative_and_end_at_the_count(scripted_run):
    _, s = scripted_run
    for name in HISTOGRAMS:
        full = "ferrite:" + name
        buckets = [(float(ls["le"]), v) for n, ls, v in s.samples if n == full + "_bucket"]
        assert buckets, name
        counts = [v for _, v in sorted(buckets)]
        assert counts == sorted(counts), name
        assert counts[-1] == s.get(full + "_count"), name


def test_kv_usage_returns_to_zero_and_the_cache_config_is_reported(scripted_run):
    _, s = scripted_run
    assert s.get("ferrite:kv_cache_usage_perc") == 0.0
    assert s.get("ferrite:cache_config_info", block_size="16", enable_prefix_caching="False") == 1
    info = [ls for n, ls, _ in s.samples if n == "ferrite:cache_config_info"][0]
    assert int(info["num_gpu_blocks"]) > 0
    assert all(ls.get("model_name") == MODEL_NAME for _, ls, _ in s.samples)


def test_every_listed_series_has_its_type(scripted_run):
    _, s = scripted_run
    expected = {"ferrite:" + n: t for n, t in VLLM_SERIES.items()} | FERRITE_ONLY
    assert s.types == expected


def test_one_json_log_line_per_finished_request(scripted_run, plain_server):
    prompt_tokens, _ = scripted_run
    lines = finished_lines(plain_server, json_format=True)
    assert len(lines) == len(prompt_tokens)
    # One line per engine request (per choice): the engine's id is unique, the client's request
    # id is shared by the choices of one request.
    assert len({l["engine_id"] for l in lines}) == len(lines)
    assert all(l["request_id"] for l in lines)
    tokenized = sorted(
        httpx.post(plain_server.url + "/tokenize", json={"prompt": p}).json()["tokens"] for p in PROMPTS)
    logged_prompts = []
    for l in lines:
        assert l["finish_reason"] == "length"
        assert (l["output_tokens"], l["cached_tokens"]) == (MAX_TOKENS, 0)
        assert l["prompt_tokens"] in prompt_tokens
        assert 0 <= l["queue_s"] and 0 < l["prefill_s"] and 0 < l["decode_s"] <= l["e2e_s"]
        assert l["ttft_s"] == pytest.approx(l["queue_s"] + l["prefill_s"], abs=2e-6)
        prompt_ids, output_ids = json.loads(l["prompt_token_ids"]), json.loads(l["output_token_ids"])
        assert len(prompt_ids) == l["prompt_tokens"] and len(output_ids) == MAX_TOKENS
        logged_prompts.append(prompt_ids)
        assert "prompt" not in l  # no prompt text without --log-prompts
    # The n=2 prompt is logged twice; every prompt's ids are what /tokenize makes of it.
    assert sorted({tuple(p) for p in logged_prompts}) == sorted(tuple(t) for t in tokenized)
    assert not any(p in plain_server.log_text() for p in PROMPTS)


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    s = Server(["--metrics-names", "vllm", "--log-prompts"], tmp_path_factory.mktemp("vllm"), "vllm")
    yield s
    s.stop()


def test_vllm_names_replace_ferrite_names(vllm_server):
    # The HTTP counter has series once a response went out: the first scrape makes one.
    scrape(vllm_server.url)
    s = scrape(vllm_server.url)
    expected = {"vllm:" + n: t for n, t in VLLM_SERIES.items()} | FERRITE_ONLY | VLLM_COMPATIBILITY
    assert s.types == expected
    assert {n.split("{")[0] for n, _, _ in s.samples if n.startswith("ferrite:")} <= {
        "ferrite:scheduler_step_seconds_bucket", "ferrite:scheduler_step_seconds_sum",
        "ferrite:scheduler_step_seconds_count", "ferrite:scale_out_needed",
        "ferrite:http_requests_total"}


def test_stop_strings_and_abandoned_streams_are_counted_by_reason(vllm_server):
    url = vllm_server.url
    body = {"model": MODEL_NAME, "temperature": 0,
            "messages": [{"role": "user", "content": "What is the capital of France? Say it twice."}]}
    # A stop string that matches at once: finished here, although the engine sees an abort.
    r = httpx.post(url + "/v1/chat/completions", json=body | {"max_tokens": 50, "stop": [" "]}, timeout=60)
    assert r.json()["choices"][0]["finish_reason"] == "stop"
    with httpx.Client(base_url=url, timeout=60) as c:
        stream = body | {"max_tokens": 1000, "ignore_eos": True, "stream": True}
        with c.stream("POST", "/v1/chat/completions", json=stream) as resp:
            for i, _ in enumerate(resp.iter_lines()):
                if i >= 3:
                    break
    s = wait_for_finished(url, "vllm:", 2)
    assert s.get("vllm:request_success_total", finished_reason="abort") == 1
    assert s.get("vllm:request_success_total", finished_reason="stop") == 1
    assert s.get("vllm:request_success_total", finished_reason="length") == 0
    assert s.get("vllm:e2e_request_latency_seconds_count") == 2
    assert s.get("vllm:kv_cache_usage_perc") == 0.0
    lines = finished_lines(vllm_server, json_format=False)
    assert len(lines) == 2
    assert sorted(re.search(r'finish_reason="?(\w+)', l).group(1) for l in lines) == ["abort", "stop"]
    # --log-prompts: the prompt text, chat template applied, is in the line.
    assert all("What is the capital of France? Say it twice." in l for l in lines)
    assert all("prompt_token_ids" not in l for l in lines)


def dashboard_exprs():
    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "expr":
                    yield v
                else:
                    yield from walk(v)
        elif isinstance(node, list):
            for v in node:
                yield from walk(v)

    return list(walk(json.loads(DASHBOARD.read_text())))


def test_the_grafana_dashboard_queries_only_exported_series(scripted_run):
    _, s = scripted_run
    exported = {n for n, _, _ in s.samples}
    exprs = dashboard_exprs()
    assert len(exprs) >= 15
    queried = {m for e in exprs for m in re.findall(r"\b(?:ferrite|vllm):[a-zA-Z0-9_:]+", e)}
    assert queried and queried <= exported, queried - exported
    # The views the issue asks for are all there.
    for needed in ["ferrite:request_success_total", "ferrite:time_to_first_token_seconds_bucket",
                   "ferrite:inter_token_latency_seconds_bucket", "ferrite:e2e_request_latency_seconds_bucket",
                   "ferrite:num_requests_running", "ferrite:num_requests_waiting",
                   "ferrite:kv_cache_usage_perc", "ferrite:prefix_cache_hits_total",
                   "ferrite:prefix_cache_queries_total", "ferrite:generation_tokens_total",
                   "ferrite:scheduler_step_seconds_sum"]:
        assert needed in queried, needed
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 30
    for p in dashboard["panels"]:
        assert {"id", "type", "title", "gridPos"} <= p.keys()
        for t in p.get("targets", []):
            assert t["expr"].count("(") == t["expr"].count(")"), t["expr"]


def test_expert_load_counts_k_experts_per_forwarded_token_in_sparse_layers(tmp_path):
    """--expert-load-metrics on a mixture of experts (random weights of the qwen2_moe fixture's
    shape: 3 layers, layer 1 dense, top-2 of 8 experts): after one request, each sparse layer's
    experts together got 2 tokens for every token the model ran (the prompt and every
    generated token but the last), the dense layer none."""
    config = json.loads((ROOT / "fixtures/arch/qwen2_moe/config.json").read_text())
    config["vocab_size"] = 512  # --load-format dummy's byte-level tokenizer has 259 tokens
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    s = Server(["--load-format", "dummy", "--expert-load-metrics"], tmp_path, "moe",
               model_file=str(path))
    try:
        deadline = time.time() + 60
        while httpx.get(s.url + "/ready", timeout=5).status_code != 200:
            assert time.time() < deadline, s.log_text()
            time.sleep(0.2)
        before = httpx.get(s.url + "/metrics", timeout=10).text
        assert "ferrite:moe_expert_tokens_total{" in before, before
        body = {"model": MODEL_NAME, "prompt": "experts, balanced?", "max_tokens": 5,
                "ignore_eos": True, "temperature": 0}
        r = httpx.post(s.url + "/v1/completions", json=body, timeout=60)
        assert r.status_code == 200, r.text
        usage = r.json()["usage"]
        forwarded = usage["prompt_tokens"] + usage["completion_tokens"] - 1
        text = httpx.get(s.url + "/metrics", timeout=10).text
        per_layer, series = {}, 0
        for line in text.splitlines():
            m = re.match(r'ferrite:moe_expert_tokens_total\{(.*)\} (\S+)$', line)
            if m:
                labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
                layer = int(labels["layer"])
                per_layer[layer] = per_layer.get(layer, 0) + float(m.group(2))
                series += 1
        assert series == 2 * 8, text
        assert per_layer == {0: 2 * forwarded, 2: 2 * forwarded}, (per_layer, usage)
    finally:
        s.stop()
