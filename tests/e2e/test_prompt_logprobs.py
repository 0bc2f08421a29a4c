"""vLLM's `prompt_logprobs` through the openai client, on completions (per choice) and chat (at
the top): one entry per prompt token (the first `null`), keyed by token id with the prompt's own
token first, and the same numbers completions' `echo` with `logprobs` reports."""

import math

import pytest

from conftest import MODEL_NAME

PROMPT = "The capital of France is Paris, and the capital of Spain is"
HI = [{"role": "user", "content": "Say hi."}]


def complete(client, **extra):
    return client.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=2, temperature=0,
                                     extra_body=extra)


def check_positions(entries, prompt_ids, n):
    assert len(entries) == len(prompt_ids)
    assert entries[0] is None
    for i, position in enumerate(entries[1:], start=1):
        items = list(position.items())
        # The prompt's own token first, then the n best (itself among them only once).
        assert items[0][0] == str(prompt_ids[i]), (i, items)
        own = items[0][1]
        assert own["rank"] >= 1 and own["logprob"] <= 0 and isinstance(own["decoded_token"], str)
        ranks = {v["rank"] for _, v in items[1:]} | ({own["rank"]} if own["rank"] <= n else set())
        assert ranks == set(range(1, n + 1)), (i, items)
        by_rank = sorted(position.values(), key=lambda v: v["rank"])
        assert all(a["logprob"] >= b["logprob"] for a, b in zip(by_rank, by_rank[1:])), (i, items)


def test_completions_answer_prompt_logprobs_per_choice(client, http):
    ids = http.post("/tokenize", json={"prompt": PROMPT}).json()["tokens"]
    for n in (0, 3):
        r = complete(client, prompt_logprobs=n)
        assert r.usage.prompt_tokens == len(ids)
        check_positions(r.choices[0].model_extra["prompt_logprobs"], ids, n)


def test_they_are_the_numbers_echo_reports(client):
    mine = complete(client, prompt_logprobs=2).choices[0].model_extra["prompt_logprobs"]
    echoed = client.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=1, temperature=0,
                                       echo=True, logprobs=1).choices[0].logprobs
    for i, position in enumerate(mine[1:], start=1):
        own = next(iter(position.values()))
        assert math.isclose(own["logprob"], echoed.token_logprobs[i], abs_tol=1e-5)
        # echo's own count of alternatives (1), though prompt_logprobs asked for 2.
        assert len(echoed.top_logprobs[i]) == 1


def test_chat_answers_them_at_the_top(client):
    r = client.chat.completions.create(model=MODEL_NAME, messages=HI, max_tokens=2, temperature=0, n=2,
                                       extra_body={"prompt_logprobs": 1, "return_token_ids": True})
    prompt_ids = r.model_extra["prompt_token_ids"]
    assert len(prompt_ids) == r.usage.prompt_tokens
    check_positions(r.model_extra["prompt_logprobs"], prompt_ids, 1)
    without = client.chat.completions.create(model=MODEL_NAME, messages=HI, max_tokens=2)
    assert "prompt_logprobs" not in (without.model_extra or {})


@pytest.mark.parametrize("body", [
    {"prompt_logprobs": -1},
    {"prompt_logprobs": 21},
    {"prompt_logprobs": 1, "stream": True},
])
def test_bad_requests_name_the_field(http, body):
    for path, base in [("/v1/chat/completions", {"messages": HI}), ("/v1/completions", {"prompt": PROMPT})]:
        r = http.post(path, json=base | body | {"max_tokens": 2})
        assert r.status_code == 400, r.text
        assert r.json()["error"]["param"] == "prompt_logprobs"
