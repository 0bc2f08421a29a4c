"""Serving behaviour: batch invariance under concurrency, prefix caching, client disconnects,
and a full waiting queue."""

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from conftest import API_KEY, MODEL_NAME, Server, metric

TOPICS = ["the sea", "mountains", "bread", "rust", "music", "winter", "cats", "trains",
          "rivers", "stars", "coffee", "books", "rain", "gardens", "bridges", "clocks"]


def ask(client, topic, stream):
    kw = dict(model=MODEL_NAME, messages=[{"role": "user", "content": f"Write one sentence about {topic}."}],
              max_tokens=16, temperature=0)
    if not stream:
        r = client.chat.completions.create(**kw)
        return r.choices[0].message.content, r.choices[0].finish_reason
    text, finish = "", None
    for chunk in client.chat.completions.create(stream=True, **kw):
        for c in chunk.choices:
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    return text, finish


def test_16_concurrent_streams_equal_each_request_alone(client):
    alone = [ask(client, t, stream=False) for t in TOPICS]
    with ThreadPoolExecutor(16) as pool:
        together = list(pool.map(lambda t: ask(client, t, stream=True), TOPICS))
    for topic, a, b in zip(TOPICS, alone, together):
        assert b[1] in ("stop", "length"), topic
        assert a == b, f"{topic}: alone {a!r} vs batched {b!r}"


def timed_completion(client, prompt):
    start = time.perf_counter()
    r = client.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=1, temperature=0)
    return time.perf_counter() - start, r


def test_a_shared_1000_token_prefix_is_cached_and_faster(client, http):
    tag = uuid.uuid4().hex[:8]
    prefix = f"Log {tag}: " + " ".join(f"entry {i} is fine;" for i in range(138))
    n_prefix = http.post("/tokenize", json={"prompt": prefix}).json()["count"]
    assert 1000 <= n_prefix <= 1300, n_prefix
    cold_time, cold = timed_completion(client, prefix + " First question: what is entry 3?")
    warm_time, warm = timed_completion(client, prefix + " Second question: what is entry 7?")
    assert cold.usage.prompt_tokens_details.cached_tokens < 992
    assert warm.usage.prompt_tokens_details.cached_tokens >= 992
    assert warm_time < cold_time, (warm_time, cold_time)


def test_a_client_that_disconnects_mid_stream_is_aborted(server, http):
    body = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "Tell me a long story."}],
            "max_tokens": 1000, "ignore_eos": True, "stream": True, "temperature": 0}
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=60) as c:
        with c.stream("POST", "/v1/chat/completions", json=body) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            got = 0
            for line in lines:
                if line.startswith("data: "):
                    got += 1
                if got >= 4:
                    break
            assert metric(http, "ferrite:num_requests_running") >= 1
    deadline = time.time() + 1.0
    while time.time() < deadline and metric(http, "ferrite:num_requests_running") != 0:
        time.sleep(0.05)
    assert metric(http, "ferrite:num_requests_running") == 0
    assert metric(http, "ferrite:kv_cache_usage_perc") == 0.0
    assert server.alive()


@pytest.fixture(scope="module")
def tiny_queue_server(tmp_path_factory):
    s = Server(["--max-waiting", "1", "--max-num-seqs", "1"], tmp_path_factory.mktemp("queue"), "queue")
    yield s
    s.stop()


def test_a_full_waiting_queue_answers_503(tiny_queue_server):
    client = openai.OpenAI(base_url=tiny_queue_server.url + "/v1", api_key="x", max_retries=0, timeout=120)

    def one(i):
        try:
            client.completions.create(model=MODEL_NAME, prompt=f"Number {i}:", max_tokens=24,
                                      temperature=0, extra_body={"ignore_eos": True})
            return 200
        except openai.APIStatusError as e:
            assert set(e.response.json()["error"]) == {"message", "type", "param", "code"}
            return e.status_code

    with ThreadPoolExecutor(6) as pool:
        codes = list(pool.map(one, range(6)))
    assert 503 in codes and 200 in codes, codes
    assert set(codes) <= {200, 503}, codes
    assert tiny_queue_server.alive()
