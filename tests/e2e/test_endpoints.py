"""/health, /v1/models, /metrics, /tokenize, /detokenize, and the API key."""

import httpx

from conftest import API_KEY, MAX_MODEL_LEN, MODEL_NAME, metric


def test_health_needs_no_key(server):
    assert httpx.get(server.url + "/health").status_code == 200


def test_models_lists_the_served_name(client):
    ids = [m.id for m in client.models.list().data]
    assert ids == [MODEL_NAME]


def test_metrics_gauges_and_counters(http):
    text = http.get("/metrics").text
    for name in ["ferrite:num_requests_running", "ferrite:num_requests_waiting", "ferrite:kv_cache_usage_perc",
                 "ferrite:prompt_tokens_total", "ferrite:generation_tokens_total",
                 "ferrite:prefix_cache_queries_total", "ferrite:prefix_cache_hits_total",
                 "ferrite:num_preemptions_total"]:
        assert f'{name}{{model_name="{MODEL_NAME}"}}' in text, name
    assert 0.0 <= metric(http, "ferrite:kv_cache_usage_perc") <= 1.0


def test_tokenize_detokenize_round_trip(http):
    r = http.post("/tokenize", json={"prompt": "Hello, world! Ünïcode ✓"}).json()
    assert r["count"] == len(r["tokens"]) > 0
    assert r["max_model_len"] == MAX_MODEL_LEN
    back = http.post("/detokenize", json={"tokens": r["tokens"]}).json()["prompt"]
    assert back == "Hello, world! Ünïcode ✓"


def test_tokenize_chat_counts_the_prompt_the_chat_endpoint_uses(http, client):
    messages = [{"role": "user", "content": "Hi there"}]
    tokens = http.post("/tokenize", json={"messages": messages, "add_generation_prompt": True}).json()["tokens"]
    r = client.chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=1, temperature=0)
    assert r.usage.prompt_tokens == len(tokens)


def test_api_key_is_required_on_the_api(server):
    body = {"model": MODEL_NAME, "prompt": "x", "max_tokens": 1}
    for headers in [{}, {"Authorization": "Bearer wrong"}, {"Authorization": API_KEY}]:
        r = httpx.post(server.url + "/v1/completions", json=body, headers=headers)
        assert r.status_code == 401, headers
        assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    assert httpx.get(server.url + "/v1/models").status_code == 401
    ok = httpx.get(server.url + "/v1/models", headers={"Authorization": f"Bearer {API_KEY}"})
    assert ok.status_code == 200
