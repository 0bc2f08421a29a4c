"""Chat and completions through the openai client: streaming and not, n, stop, logprobs, echo,
return_token_ids, usage."""

import math

from conftest import MODEL_NAME

CAPITAL = [{"role": "user", "content": "What is the capital of France?"}]


def chat(client, **kw):
    kw.setdefault("messages", CAPITAL)
    kw.setdefault("max_tokens", 12)
    kw.setdefault("temperature", 0)
    return client.chat.completions.create(model=MODEL_NAME, **kw)


def stream_text(stream):
    text, finish, usage = "", None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            text += getattr(c, "delta", None) and (c.delta.content or "") or getattr(c, "text", "") or ""
            finish = c.finish_reason or finish
    return text, finish, usage


def test_chat_greedy_knows_paris(client):
    r = chat(client)
    assert "Paris" in r.choices[0].message.content
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_chat_stream_equals_non_stream(client):
    full = chat(client).choices[0].message.content
    text, finish, usage = stream_text(chat(client, stream=True, stream_options={"include_usage": True}))
    assert text == full
    assert finish in ("stop", "length")
    assert usage is not None and usage.completion_tokens > 0


def test_completions_stream_equals_non_stream(client):
    kw = dict(model=MODEL_NAME, prompt="The three primary colors are", max_tokens=10, temperature=0)
    full = client.completions.create(**kw)
    assert full.choices[0].finish_reason == "length"
    assert full.usage.completion_tokens == 10
    text, finish, _ = stream_text(client.completions.create(stream=True, **kw))
    assert text == full.choices[0].text
    assert finish == "length"


def test_n_2_gives_two_choices(client):
    r = chat(client, n=2, temperature=0.8, seed=7, max_tokens=8)
    assert sorted(c.index for c in r.choices) == [0, 1]
    assert all(c.message.content for c in r.choices)
    assert r.usage.completion_tokens <= 2 * 8
    greedy = chat(client, n=2, max_tokens=8)
    assert greedy.choices[0].message.content == greedy.choices[1].message.content


def test_seeded_sampling_is_reproducible(client):
    a = chat(client, temperature=1.0, seed=1234, max_tokens=10).choices[0].message.content
    b = chat(client, temperature=1.0, seed=1234, max_tokens=10).choices[0].message.content
    assert a == b


def test_stop_string_truncates_and_is_never_streamed(client):
    kw = dict(model=MODEL_NAME, prompt="Count: one, two, three, four, five,", max_tokens=12, temperature=0)
    full = client.completions.create(**kw).choices[0].text
    assert len(full) > 6
    stop = full[3:6]
    want = full[: full.index(stop)]
    r = client.completions.create(stop=[stop], **kw)
    assert r.choices[0].text == want
    assert r.choices[0].finish_reason == "stop"
    text, finish, _ = stream_text(client.completions.create(stop=stop, stream=True, **kw))
    assert text == want and finish == "stop"


def test_the_stop_string_that_matched_is_named_in_stop_reason(client):
    """vLLM's `stop_reason`: the stop string that finished a choice, complete and streamed;
    absent when the choice ended otherwise."""
    kw = dict(model=MODEL_NAME, prompt="Count: one, two, three, four, five,", max_tokens=12, temperature=0)
    full = client.completions.create(**kw)
    assert getattr(full.choices[0], "stop_reason", None) is None
    text = full.choices[0].text
    stop = text[3:6]
    r = client.completions.create(stop=["never in the text", stop], **kw)
    assert r.choices[0].finish_reason == "stop" and r.choices[0].stop_reason == stop
    last = [c for chunk in client.completions.create(stop=[stop], stream=True, **kw) for c in chunk.choices][-1]
    assert last.finish_reason == "stop" and last.stop_reason == stop
    ask = dict(model=MODEL_NAME, messages=[{"role": "user", "content": "Count from one to ten in words."}],
               max_tokens=30, temperature=0)
    answer = client.chat.completions.create(**ask).choices[0].message.content
    words = answer.split()
    assert len(words) > 3, answer
    stop = words[2]
    r = client.chat.completions.create(stop=[stop], **ask)
    assert r.choices[0].stop_reason == stop
    assert r.choices[0].message.content == answer[: answer.index(stop)]
    chunks = [c for chunk in client.chat.completions.create(stop=[stop], stream=True, **ask) for c in chunk.choices]
    assert chunks[-1].finish_reason == "stop" and chunks[-1].stop_reason == stop


def test_the_stop_token_id_that_ended_a_choice_is_its_stop_reason(client):
    """vLLM's `stop_reason` is the token id, a number, when a choice ended on one of its
    `stop_token_ids`, complete and streamed; a stop on the model's EOS names nothing, even when
    the request lists it, unless the request ignores EOS."""
    kw = dict(model=MODEL_NAME, prompt="Count: one, two, three, four, five,", max_tokens=12, temperature=0)
    ids = client.completions.create(extra_body={"return_token_ids": True}, **kw).choices[0].token_ids
    stop_id = ids[3]
    asked = dict(extra_body={"stop_token_ids": [stop_id], "return_token_ids": True}, **kw)
    c = client.completions.create(**asked).choices[0]
    assert (c.finish_reason, c.stop_reason) == ("stop", stop_id) and type(c.stop_reason) is int
    assert c.token_ids == ids[: ids.index(stop_id) + 1]
    last = [c for chunk in client.completions.create(stream=True, **asked) for c in chunk.choices][-1]
    assert (last.finish_reason, last.stop_reason) == ("stop", stop_id)
    answer = chat(client, max_tokens=64, extra_body={"return_token_ids": True}).choices[0]
    assert answer.finish_reason == "stop"
    eos = answer.token_ids[-1]
    on_eos = chat(client, max_tokens=64, extra_body={"stop_token_ids": [eos]}).choices[0]
    assert on_eos.finish_reason == "stop" and getattr(on_eos, "stop_reason", None) is None
    ignoring = chat(client, max_tokens=64, extra_body={"stop_token_ids": [eos], "ignore_eos": True}).choices[0]
    assert (ignoring.finish_reason, ignoring.stop_reason) == ("stop", eos)


def test_chat_logprobs(client):
    r = chat(client, logprobs=True, top_logprobs=3, max_tokens=6)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for e in content:
        assert len(e.top_logprobs) == 3
        lps = [t.logprob for t in e.top_logprobs]
        assert lps == sorted(lps, reverse=True) and all(lp <= 0 for lp in lps)
        # Greedy: the chosen token is the most likely one.
        assert math.isclose(e.logprob, lps[0], abs_tol=1e-4)
        assert bytes(e.bytes).decode("utf-8", "replace") == e.token
    assert "".join(e.token for e in content) == r.choices[0].message.content


def test_completions_logprobs_with_echo(client, http):
    prompt = "Hello, my name is"
    r = client.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=4, temperature=0,
                                  logprobs=2, echo=True)
    c = r.choices[0]
    n_prompt = len(http.post("/tokenize", json={"prompt": prompt}).json()["tokens"])
    assert c.text.startswith(prompt)
    lp = c.logprobs
    assert len(lp.tokens) == n_prompt + 4
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert all(x is not None and x <= 0 for x in lp.token_logprobs[1:])
    assert all(len(t) >= 1 for t in lp.top_logprobs[1:])
    assert lp.text_offset[0] == 0
    assert all(b >= a for a, b in zip(lp.text_offset, lp.text_offset[1:]))
    assert "".join(lp.tokens) == c.text


def test_return_token_ids(client, http):
    r = chat(client, extra_body={"return_token_ids": True}, max_tokens=6)
    body = r.model_dump()
    want_prompt = http.post("/tokenize", json={"messages": CAPITAL, "add_generation_prompt": True}).json()["tokens"]
    assert body["prompt_token_ids"] == want_prompt
    ids = body["choices"][0]["token_ids"]
    assert len(ids) == r.usage.completion_tokens
    text = http.post("/detokenize", json={"tokens": ids}).json()["prompt"]
    assert text.replace("<|im_end|>", "") == r.choices[0].message.content

    c = client.completions.create(model=MODEL_NAME, prompt=[1, 2, 3, 4], max_tokens=3, temperature=0,
                                  extra_body={"return_token_ids": True}).model_dump()
    assert c["choices"][0]["prompt_token_ids"] == [1, 2, 3, 4]
    assert len(c["choices"][0]["token_ids"]) == 3
