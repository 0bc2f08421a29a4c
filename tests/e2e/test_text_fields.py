"""vLLM's text fields through the openai client: include_stop_str_in_output,
spaces_between_special_tokens, add_special_tokens, truncate_prompt_tokens, and completions'
echo. Each checked against an independent oracle (the same request without the field, /tokenize,
a request whose prompt is the expected one)."""

import pytest

from conftest import MODEL_NAME, Server

PROMPT = "The three primary colors are"
CAPITAL = [{"role": "user", "content": "What is the capital of France?"}]


def complete(client, **kw):
    kw.setdefault("prompt", PROMPT)
    kw.setdefault("max_tokens", 20)
    kw.setdefault("temperature", 0)
    return client.completions.create(model=MODEL_NAME, **kw)


def streamed_text(stream):
    text, finish = "", None
    for chunk in stream:
        for c in chunk.choices:
            text += getattr(c, "text", None) or (getattr(c, "delta", None) and c.delta.content) or ""
            finish = c.finish_reason or finish
    return text, finish


def test_include_stop_str_in_output_ends_the_text_with_the_stop_string(client):
    free = complete(client).choices[0].text
    # A stop string the free text holds: the answer is the free text up to and including it.
    stop = " and"
    assert stop in free, free
    want = free[: free.index(stop) + len(stop)]
    kept = complete(client, stop=[stop], extra_body={"include_stop_str_in_output": True})
    c = kept.choices[0]
    assert c.text == want and c.text.endswith(stop)
    assert c.finish_reason == "stop" and c.model_extra["stop_reason"] == stop
    dropped = complete(client, stop=[stop]).choices[0].text
    assert dropped == free[: free.index(stop)]
    text, finish = streamed_text(complete(client, stop=[stop], stream=True,
                                          extra_body={"include_stop_str_in_output": True}))
    assert (text, finish) == (want, "stop")


def test_include_stop_str_in_output_on_chat(client):
    kw = dict(model=MODEL_NAME, messages=CAPITAL, max_tokens=12, temperature=0)
    free = client.chat.completions.create(**kw).choices[0].message.content
    stop = "Paris"
    assert stop in free, free
    r = client.chat.completions.create(stop=[stop], extra_body={"include_stop_str_in_output": True}, **kw)
    assert r.choices[0].message.content == free[: free.index(stop) + len(stop)]
    stream = client.chat.completions.create(stop=[stop], stream=True,
                                            extra_body={"include_stop_str_in_output": True}, **kw)
    assert streamed_text(stream)[0] == r.choices[0].message.content


def test_spaces_between_special_tokens_is_accepted_and_keeps_the_tokenizer_s_text(client, http):
    # SmolLM2's byte-level decoder puts no space between special tokens, so `false` changes
    # nothing here (the unit tests check a decoder that does); the text is the ids' own text.
    kw = dict(max_tokens=12, extra_body={"skip_special_tokens": False, "return_token_ids": True})
    base = complete(client, **kw).choices[0]
    for spaces in (True, False):
        body = {**kw["extra_body"], "spaces_between_special_tokens": spaces}
        c = complete(client, max_tokens=12, extra_body=body).choices[0]
        assert c.text == base.text
        assert c.text == http.post("/detokenize", json={"tokens": c.model_extra["token_ids"]}).json()["prompt"]


def test_truncate_prompt_tokens_keeps_the_last_n_tokens(client, http):
    prompt = "One, two, three, four, five, six, seven, eight, nine, ten,"
    ids = http.post("/tokenize", json={"prompt": prompt}).json()["tokens"]
    n = 6
    assert len(ids) > n
    cut = complete(client, prompt=prompt, max_tokens=8, extra_body={"truncate_prompt_tokens": n})
    assert cut.usage.prompt_tokens == n
    # The same as a request whose prompt is those last n tokens.
    last = complete(client, prompt=ids[-n:], max_tokens=8)
    assert cut.choices[0].text == last.choices[0].text
    assert last.usage.prompt_tokens == n
    # echo repeats what the model read.
    echoed = complete(client, prompt=prompt, max_tokens=8, echo=True,
                      extra_body={"truncate_prompt_tokens": n})
    tail = http.post("/detokenize", json={"tokens": ids[-n:]}).json()["prompt"]
    assert echoed.choices[0].text == tail + last.choices[0].text
    # A prompt shorter than n is left whole; -1 keeps up to the context length.
    whole = complete(client, prompt=prompt, max_tokens=8, extra_body={"truncate_prompt_tokens": 1000})
    assert whole.usage.prompt_tokens == len(ids)
    model_len = complete(client, prompt=prompt, max_tokens=8, extra_body={"truncate_prompt_tokens": -1})
    assert model_len.usage.prompt_tokens == len(ids)


def test_truncate_prompt_tokens_on_chat(client, http):
    rendered = http.post("/tokenize", json={"messages": CAPITAL, "add_generation_prompt": True}).json()["tokens"]
    n = 8
    r = client.chat.completions.create(model=MODEL_NAME, messages=CAPITAL, max_tokens=8, temperature=0,
                                       extra_body={"truncate_prompt_tokens": n, "return_token_ids": True})
    assert r.usage.prompt_tokens == n
    assert r.model_extra["prompt_token_ids"] == rendered[-n:]
    raw = complete(client, prompt=rendered[-n:], max_tokens=8)
    assert r.choices[0].message.content == raw.choices[0].text.replace("<|im_end|>", "")


@pytest.mark.parametrize("value,says", [(0, "at least 1"), (-2, "at least 1"), (4096, "max_model_len")])
def test_bad_truncations_are_400s_naming_the_field(http, value, says):
    r = http.post("/v1/completions", json={"model": MODEL_NAME, "prompt": PROMPT, "max_tokens": 4,
                                           "truncate_prompt_tokens": value})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "truncate_prompt_tokens" and says in err["message"]


def test_echo_prepends_the_prompt(client):
    plain = complete(client, max_tokens=8).choices[0].text
    echoed = complete(client, max_tokens=8, echo=True).choices[0].text
    assert echoed == PROMPT + plain
    text, _ = streamed_text(complete(client, max_tokens=8, echo=True, stream=True))
    assert text == PROMPT + plain
    # Several prompts: each choice echoes its own.
    two = complete(client, prompt=[PROMPT, "Hello"], max_tokens=4, echo=True)
    assert two.choices[0].text.startswith(PROMPT) and two.choices[1].text.startswith("Hello")


# Gemma's turn format, BOS written by the template as Gemma's own template writes it (the base
# 270M model's file ships none).
GEMMA_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}"
                  "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    """Gemma's tokenizer adds a BOS (SmolLM2's and Qwen's add none)."""
    s = Server(["--chat-template", GEMMA_TEMPLATE], tmp_path_factory.mktemp("gemma"), "gemma",
               "gemma-3-270m-q4_k_m.gguf", "gemma")
    yield s
    s.stop()


def test_add_special_tokens(gemma):
    import httpx
    import openai

    client = openai.OpenAI(base_url=gemma.url + "/v1", api_key="unused", max_retries=0, timeout=120)
    http = httpx.Client(base_url=gemma.url, timeout=120)
    with_bos = http.post("/tokenize", json={"prompt": PROMPT}).json()["tokens"]
    without = http.post("/tokenize", json={"prompt": PROMPT, "add_special_tokens": False}).json()["tokens"]
    assert with_bos == [2] + without
    kw = dict(model="gemma", prompt=PROMPT, max_tokens=4, temperature=0)
    assert client.completions.create(**kw).usage.prompt_tokens == len(with_bos)
    off = client.completions.create(extra_body={"add_special_tokens": False, "return_token_ids": True}, **kw)
    assert off.usage.prompt_tokens == len(without)
    assert off.choices[0].model_extra["prompt_token_ids"] == without
    # Chat: the template writes the BOS; the tokenizer adds another only when asked (as vLLM).
    chat_ids = http.post("/tokenize", json={"messages": CAPITAL}).json()["tokens"]
    assert chat_ids[0] == 2 and chat_ids[1] != 2
    doubled = http.post("/tokenize", json={"messages": CAPITAL, "add_special_tokens": True}).json()["tokens"]
    assert doubled == [2] + chat_ids
    ckw = dict(model="gemma", messages=CAPITAL, max_tokens=4, temperature=0)
    assert client.chat.completions.create(**ckw).usage.prompt_tokens == len(chat_ids)
    on = client.chat.completions.create(extra_body={"add_special_tokens": True, "return_token_ids": True}, **ckw)
    assert on.model_extra["prompt_token_ids"] == doubled
