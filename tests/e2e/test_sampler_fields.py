"""The logit rules through the openai client, on chat and completions: `logit_bias` (OpenAI's),
`min_tokens`, `allowed_token_ids` and `bad_words` (vLLM's). Each is checked against the same
request without it (greedy, so the difference is the field's doing) and through the token ids
of the answer (`return_token_ids`); bad values are a 400 naming the field."""

import httpx
import openai
import pytest

from conftest import MODEL_NAME

CAPITAL = [{"role": "user", "content": "What is the capital of France?"}]
HI = [{"role": "user", "content": "Say hi."}]
PROMPT = "The capital of France is"
# SmolLM2's vocabulary.
VOCAB = 49152


def chat(client, messages=CAPITAL, **extra):
    kw = dict(model=MODEL_NAME, messages=messages, max_tokens=extra.pop("max_tokens", 12),
              temperature=extra.pop("temperature", 0))
    body = {"return_token_ids": True} | extra.pop("extra_body", {})
    return client.chat.completions.create(extra_body=body, **kw, **extra).choices[0]


def complete(client, **extra):
    kw = dict(model=MODEL_NAME, prompt=PROMPT, max_tokens=extra.pop("max_tokens", 12),
              temperature=extra.pop("temperature", 0))
    body = {"return_token_ids": True} | extra.pop("extra_body", {})
    return client.completions.create(extra_body=body, **kw, **extra).choices[0]


def ids_of(choice):
    return choice.model_extra["token_ids"]


def token_ids(http, text):
    return http.post("/tokenize", json={"prompt": text, "add_special_tokens": False}).json()["tokens"]


def contains(seq, sub):
    return any(seq[i:i + len(sub)] == sub for i in range(len(seq) - len(sub) + 1))


# --- logit_bias --------------------------------------------------------------------------------

def test_a_bias_of_plus_100_makes_greedy_and_sampled_output_that_token(client, http):
    banana = token_ids(http, " banana")[0]
    for temperature in (0, 1.0):
        for answer in (chat(client, temperature=temperature, logit_bias={str(banana): 100}),
                       complete(client, temperature=temperature, logit_bias={str(banana): 100})):
            assert ids_of(answer) == [banana] * 12, answer
            assert answer.finish_reason == "length"


def test_a_bias_of_minus_100_on_the_greedy_token_changes_it(client):
    for ask in (chat, complete):
        free = ids_of(ask(client))
        first = free[0]
        banned = ask(client, logit_bias={str(first): -100})
        assert ids_of(banned)[0] != first
        assert first not in ids_of(banned)


def test_a_biased_stream_matches_the_complete_answer(client):
    bias = {"11": 5, "28": -100}
    whole = client.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=12, temperature=0,
                                      logit_bias=bias).choices[0].text
    stream = client.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=12, temperature=0,
                                       logit_bias=bias, stream=True)
    assert "".join(c.choices[0].text for c in stream if c.choices) == whole


# --- min_tokens --------------------------------------------------------------------------------

def test_min_tokens_holds_the_end_back(client):
    free = chat(client, HI, max_tokens=60)
    assert free.finish_reason == "stop", free
    n = len(ids_of(free))
    held = chat(client, HI, max_tokens=60, extra_body={"min_tokens": n + 10})
    assert len(ids_of(held)) >= n + 10
    assert ids_of(held)[: n - 1] == ids_of(free)[: n - 1], "the same answer until EOS was due"
    # The EOS ends the free answer's ids; it may come once n - 1 tokens came before it, so
    # min_tokens n - 1 changes nothing and n holds it back one token (vLLM's count).
    assert ids_of(chat(client, HI, max_tokens=60, extra_body={"min_tokens": n - 1})) == ids_of(free)
    one_more = ids_of(chat(client, HI, max_tokens=60, extra_body={"min_tokens": n}))
    assert one_more[: n - 1] == ids_of(free)[: n - 1] and one_more[n - 1] != ids_of(free)[-1]


def test_min_tokens_above_max_tokens_is_a_400(http):
    for path, body in [("/v1/chat/completions", {"messages": HI}), ("/v1/completions", {"prompt": PROMPT})]:
        r = http.post(path, json=body | {"max_tokens": 4, "min_tokens": 5})
        assert r.status_code == 400, r.text
        assert r.json()["error"]["param"] == "min_tokens"
    # Completions' default max_tokens (16) counts too.
    r = http.post("/v1/completions", json={"prompt": PROMPT, "min_tokens": 17})
    assert r.status_code == 400 and r.json()["error"]["param"] == "min_tokens"


# --- allowed_token_ids -------------------------------------------------------------------------

def test_only_allowed_ids_come_out(client, http):
    allowed = sorted(set(token_ids(http, " yes no maybe Paris London, the city.")))
    for temperature in (0, 1.0):
        for ask in (chat, complete):
            answer = ask(client, temperature=temperature, seed=3,
                         extra_body={"allowed_token_ids": allowed, "ignore_eos": True})
            assert set(ids_of(answer)) <= set(allowed), ids_of(answer)
            assert len(ids_of(answer)) == 12


# --- bad_words ---------------------------------------------------------------------------------

def test_a_bad_word_is_never_completed(client, http):
    for ask in (chat, complete):
        free = ask(client, max_tokens=16)
        assert "Paris" in (free.message.content if ask is chat else free.text), free
        banned = ask(client, max_tokens=16, extra_body={"bad_words": ["Paris"]})
        out = ids_of(banned)
        for form in (token_ids(http, "Paris"), token_ids(http, " Paris")):
            assert not contains(out, form), (form, out)
        assert out != ids_of(free)


# --- bad values --------------------------------------------------------------------------------

@pytest.mark.parametrize("field,value", [
    ("logit_bias", {"abc": 1}),
    ("logit_bias", {"5": 101}),
    ("logit_bias", {"5": "x"}),
    ("logit_bias", {str(VOCAB): 1}),
    ("min_tokens", -1),
    ("allowed_token_ids", []),
    ("allowed_token_ids", [1, VOCAB]),
    ("bad_words", "Paris"),
    ("bad_words", [""]),
])
def test_bad_values_are_a_400_naming_the_field(http, field, value):
    for path, body in [("/v1/chat/completions", {"messages": HI}), ("/v1/completions", {"prompt": PROMPT})]:
        r = http.post(path, json=body | {field: value, "max_tokens": 2})
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["param"] == field and err["type"] == "invalid_request_error", err


def test_the_client_raises_for_a_bad_bias(client):
    with pytest.raises(openai.BadRequestError, match="logit_bias"):
        client.chat.completions.create(model=MODEL_NAME, messages=HI, max_tokens=2,
                                       logit_bias={"100000000": 5})


def test_null_fields_ask_for_nothing(http: httpx.Client):
    nulls = {"logit_bias": None, "min_tokens": None, "allowed_token_ids": None, "bad_words": None}
    r = http.post("/v1/chat/completions", json={"messages": HI, "max_tokens": 2} | nulls)
    assert r.status_code == 200, r.text


def test_best_of_returns_the_candidates_of_highest_mean_logprob(client):
    # A seeded request's choices are reproducible: best_of=4 draws the four candidates n=4
    # returns, and keeps the two of highest mean logprob per token, best first.
    ask = dict(model=MODEL_NAME, prompt="The weather today is", max_tokens=8, temperature=1.0,
               seed=11)
    every = client.completions.create(n=4, logprobs=0, **ask)
    ranked = sorted(every.choices, key=lambda c: -sum(c.logprobs.token_logprobs)
                    / len(c.logprobs.token_logprobs))
    best = client.completions.create(n=2, best_of=4, logprobs=0, **ask)
    assert [c.text for c in best.choices] == [c.text for c in ranked[:2]]
    assert [c.index for c in best.choices] == [0, 1]
    # Every candidate's tokens are counted.
    assert best.usage.completion_tokens == every.usage.completion_tokens
    plain = client.completions.create(best_of=3, **ask)
    assert len(plain.choices) == 1 and plain.choices[0].logprobs is None
    for bad in [dict(n=3, best_of=2), dict(best_of=3, stream=True)]:
        with pytest.raises(openai.BadRequestError) as e:
            client.completions.create(**{**ask, **bad})
        assert e.value.body["param"] == "best_of"


def _teacher_forced(http, prompt_ids, output_ids):
    """The logprob the model gives each of `output_ids` after `prompt_ids` (prompt_logprobs)."""
    r = http.post("/v1/completions", json={"model": MODEL_NAME, "prompt": prompt_ids + output_ids,
                                           "max_tokens": 1, "prompt_logprobs": 0})
    assert r.status_code == 200, r.text
    entries = r.json()["choices"][0]["prompt_logprobs"][len(prompt_ids):]
    return [e[str(t)]["logprob"] for e, t in zip(entries, output_ids)]


def _beam_score(http, prompt_ids, choice, length_penalty):
    """vLLM's beam score of a choice, from logprobs found independently of the search."""
    ids = choice["token_ids"]
    total = sum(_teacher_forced(http, prompt_ids, ids))
    length = len(prompt_ids) + len(ids) - (1 if choice["finish_reason"] == "stop" else 0)
    return total / length ** length_penalty


@pytest.mark.parametrize("length_penalty", [1.0, 0.0])
def test_beam_search_scores_at_least_greedy_and_comes_best_first(http, length_penalty):
    ask = {"model": MODEL_NAME, "prompt": "The three primary colors are", "max_tokens": 6,
           "return_token_ids": True}
    beams = http.post("/v1/completions", json={**ask, "n": 3, "use_beam_search": True,
                                               "length_penalty": length_penalty}).json()
    assert len(beams["choices"]) == 3, beams
    prompt_ids = beams["choices"][0]["prompt_token_ids"]
    scores = [_beam_score(http, prompt_ids, c, length_penalty) for c in beams["choices"]]
    assert scores == sorted(scores, reverse=True), scores
    greedy = http.post("/v1/completions", json={**ask, "temperature": 0}).json()["choices"][0]
    assert scores[0] >= _beam_score(http, prompt_ids, greedy, length_penalty) - 1e-4
    assert beams["usage"]["completion_tokens"] == sum(len(c["token_ids"]) for c in beams["choices"])


def test_one_beam_without_eos_is_greedy_and_bad_combinations_are_400(http, client):
    ask = {"model": MODEL_NAME, "prompt": "Once upon a time", "max_tokens": 8, "ignore_eos": True}
    one = http.post("/v1/completions", json={**ask, "use_beam_search": True}).json()
    greedy = http.post("/v1/completions", json={**ask, "temperature": 0}).json()
    assert one["choices"][0]["text"] == greedy["choices"][0]["text"]
    for field, value in [("stream", True), ("stop", ["."]), ("logprobs", 1), ("echo", True)]:
        r = http.post("/v1/completions", json={**ask, "use_beam_search": True, field: value})
        assert r.status_code == 400 and r.json()["error"]["param"] == field, r.text
    r = http.post("/v1/completions", json={**ask, "length_penalty": 2.0})
    assert r.status_code == 400 and r.json()["error"]["param"] == "length_penalty"


def test_chat_beam_search_answers_n_beams_best_first(client):
    answer = client.chat.completions.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": "Name a fruit."}], n=2,
        max_tokens=6, extra_body={"use_beam_search": True, "length_penalty": 1.0})
    assert len(answer.choices) == 2
    assert all(c.message.content for c in answer.choices)
    assert answer.choices[0].message.content != answer.choices[1].message.content
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model=MODEL_NAME, messages=[{"role": "user", "content": "Hi"}], logprobs=True,
            max_tokens=4, extra_body={"use_beam_search": True})
    assert e.value.body["param"] == "logprobs"
