"""Speculative decoding through the server: greedy answers are the same text as without it
(n-gram, suffix and draft-model proposers), structured outputs included (drafts checked against the
grammar), a request can opt out, and /metrics carries vLLM's spec_decode_* counters."""

import json

from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from conftest import MODEL_FILE, MODEL_NAME, Server, models_dir

PROMPTS = [
    "Write a Python function that returns the n-th Fibonacci number.",
    "List the planets of the solar system in order.",
    "Repeat after me: the quick brown fox jumps over the lazy dog. The quick brown fox",
    "What is the capital of France?",
]


RECORD = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 20}, "planets": {"type": "array", "maxItems": 4,
    "items": {"enum": ["Mercury", "Venus", "Earth", "Mars"]}}, "count": {"type": "integer", "minimum": 0, "maximum": 99}},
    "required": ["name", "planets", "count"], "additionalProperties": False}


def answers(server: Server, extra=None, max_tokens=48):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120)

    def ask(prompt):
        r = client.chat.completions.create(
            model=MODEL_NAME, messages=[{"role": "user", "content": prompt}],
            temperature=0, max_tokens=max_tokens, extra_body=extra or {},
        )
        return r.choices[0].message.content

    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        return list(pool.map(ask, PROMPTS))


def counter(server: Server, name: str) -> float:
    total = 0.0
    for line in httpx.get(server.url + "/metrics").text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    s = Server([], tmp_path_factory.mktemp("plain"), "spec-plain")
    yield s
    s.stop()


@pytest.fixture(scope="module", params=["ngram", "suffix", "draft"])
def speculative(request, tmp_path_factory):
    # No batch-size limit: the point is speculation inside a batch of concurrent requests.
    args = ["--speculative", request.param, "--speculative-fixed-k", "--num-speculative-tokens", "3",
            "--speculative-disable-by-batch-size", "0"]
    if request.param == "draft":
        # The model as its own draft: every draft is accepted, which exercises long runs.
        args += ["--draft-model", str(models_dir() / MODEL_FILE)]
    s = Server(args, tmp_path_factory.mktemp(request.param), f"spec-{request.param}")
    yield s
    s.stop()


def test_greedy_answers_are_the_same_text(plain, speculative):
    assert answers(speculative) == answers(plain)
    drafted = counter(speculative, "ferrite:spec_decode_num_draft_tokens_total")
    accepted = counter(speculative, "ferrite:spec_decode_num_accepted_tokens_total")
    per_position = counter(speculative, "ferrite:spec_decode_num_accepted_tokens_per_pos_total")
    assert drafted > 0 and 0 <= accepted <= drafted
    assert per_position == accepted
    assert counter(speculative, "ferrite:spec_decode_num_drafts_total") > 0


def test_a_request_can_opt_out(plain, speculative):
    before = counter(speculative, "ferrite:spec_decode_num_drafts_total")
    assert answers(speculative, {"speculative_decoding": False}) == answers(plain)
    assert counter(speculative, "ferrite:spec_decode_num_drafts_total") == before


def test_a_predicted_output_gives_the_same_text_and_counts_its_drafts(plain, speculative):
    client = openai.OpenAI(base_url=speculative.url + "/v1", api_key="none", max_retries=0, timeout=120)
    want = answers(plain)
    kept = total = 0
    for prompt, text in zip(PROMPTS, want):
        ask = dict(model=MODEL_NAME, messages=[{"role": "user", "content": prompt}], temperature=0,
                   max_tokens=48)
        r = client.chat.completions.create(**ask, prediction={"type": "content", "content": text})
        assert r.choices[0].message.content == text
        details = r.usage.completion_tokens_details
        kept += details.accepted_prediction_tokens
        total += r.usage.completion_tokens
        # A prediction that has nothing to do with the answer changes nothing either.
        wrong = client.chat.completions.create(
            **ask, prediction={"type": "content", "content": "banana split " * 30})
        assert wrong.choices[0].message.content == text
    # The answer as its own prediction: most of it comes from kept drafts.
    assert kept >= total // 2, (kept, total)
    # A stop string ends the answer in the server, before the engine's last output: the drafts
    # kept until then are still counted.
    text = want[0]
    at = next(i for i in range(len(text) // 2, len(text) - 6)
              if text[i] == " " and text.find(text[i:i + 6]) == i)
    stopped = client.chat.completions.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": PROMPTS[0]}], temperature=0,
        max_tokens=48, stop=[text[at:at + 6]], prediction={"type": "content", "content": text})
    assert stopped.choices[0].message.content == text[:at]
    assert stopped.choices[0].finish_reason == "stop"
    assert stopped.usage.completion_tokens_details.accepted_prediction_tokens > 0
    # Without a speculative method, a prediction could change nothing: a 400 naming it.
    r = httpx.post(plain.url + "/v1/chat/completions", json={
        "model": MODEL_NAME, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
        "prediction": {"type": "content", "content": "hello"}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "prediction", r.text


def test_plain_servers_export_no_spec_counters(plain):
    assert "spec_decode" not in httpx.get(plain.url + "/metrics").text


def test_structured_answers_are_the_same_with_drafts(plain, speculative):
    schema = {"response_format": {"type": "json_schema",
                                  "json_schema": {"name": "record", "schema": RECORD}}}
    before = counter(speculative, "ferrite:spec_decode_num_draft_tokens_total")
    got = answers(speculative, schema, max_tokens=120)
    assert got == answers(plain, schema, max_tokens=120)
    for text in got:
        value = json.loads(text)
        assert set(value) == {"name", "planets", "count"}
    # The grammar-constrained requests were drafted for.
    assert counter(speculative, "ferrite:spec_decode_num_draft_tokens_total") > before


def test_answers_under_logit_rules_are_the_same_with_drafts(plain, speculative):
    # " the" (278) pushed up, "," (28) banned, a bad word, and the end held back: every rule
    # changes these answers, and drafts are verified against the ruled distribution.
    rules = {"logit_bias": {"278": 3, "28": -100}, "bad_words": ["Python"], "min_tokens": 40}
    before = counter(speculative, "ferrite:spec_decode_num_draft_tokens_total")
    got = answers(speculative, rules)
    assert got == answers(plain, rules)
    assert got != answers(plain)
    assert all("," not in text for text in got), got
    assert counter(speculative, "ferrite:spec_decode_num_draft_tokens_total") > before
