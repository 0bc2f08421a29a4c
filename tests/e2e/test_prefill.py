"""Assistant prefill: chat's `continue_final_message` (vLLM) and Anthropic's final assistant
turn continue the last message instead of closing it. Oracle: a raw completion of the rendered
prefix (the /tokenize ids of the same messages with continue_final_message) gives the same text."""

import anthropic
import pytest

from conftest import API_KEY, MODEL_NAME

PREFIX = "The capital of France is"
CONVERSATION = [{"role": "user", "content": "What is the capital of France?"},
                {"role": "assistant", "content": PREFIX}]


@pytest.fixture(scope="module")
def claude(server) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key=API_KEY, max_retries=0, timeout=120)


def rendered_prefix(http, messages):
    r = http.post("/tokenize", json={"messages": messages, "continue_final_message": True})
    assert r.status_code == 200, r.text
    return r.json()["tokens"]


def raw_continuation(client, ids, max_tokens):
    return client.completions.create(model=MODEL_NAME, prompt=ids, max_tokens=max_tokens,
                                     temperature=0)


def test_the_prefix_ends_with_the_final_message_unclosed(http):
    ids = rendered_prefix(http, CONVERSATION)
    text = http.post("/detokenize", json={"tokens": ids}).json()["prompt"]
    assert text.endswith("<|im_start|>assistant\n" + PREFIX), text
    closed = http.post("/tokenize", json={"messages": CONVERSATION, "add_generation_prompt": False}).json()
    assert http.post("/detokenize", json={"tokens": closed["tokens"]}).json()["prompt"].endswith("<|im_end|>\n")


def test_continue_final_message_continues_the_prefix(client, http):
    ids = rendered_prefix(http, CONVERSATION)
    kw = dict(model=MODEL_NAME, messages=CONVERSATION, max_tokens=10, temperature=0)
    r = client.chat.completions.create(extra_body={"continue_final_message": True}, **kw)
    raw = raw_continuation(client, ids, 10)
    assert r.usage.prompt_tokens == len(ids)
    assert r.choices[0].message.content == raw.choices[0].text.replace("<|im_end|>", "")
    assert r.usage.completion_tokens == raw.usage.completion_tokens
    # add_generation_prompt false said explicitly is the same request.
    same = client.chat.completions.create(
        extra_body={"continue_final_message": True, "add_generation_prompt": False}, **kw)
    assert same.choices[0].message.content == r.choices[0].message.content
    stream = client.chat.completions.create(stream=True, extra_body={"continue_final_message": True}, **kw)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == r.choices[0].message.content


def test_continue_final_message_with_add_generation_prompt_is_a_400(http):
    r = http.post("/v1/chat/completions", json={
        "model": MODEL_NAME, "messages": CONVERSATION, "max_tokens": 4,
        "continue_final_message": True, "add_generation_prompt": True})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "continue_final_message"


def test_a_final_message_the_template_cannot_continue_is_a_400(http):
    r = http.post("/v1/chat/completions", json={
        "model": MODEL_NAME, "max_tokens": 4, "continue_final_message": True,
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": " "}]})
    assert r.status_code == 400, r.text
    assert "no text to continue" in r.json()["error"]["message"]


def test_anthropic_final_assistant_turn_is_continued(claude, client, http):
    ids = rendered_prefix(http, CONVERSATION)
    m = claude.messages.create(model=MODEL_NAME, max_tokens=10, extra_body={"temperature": 0},
                               messages=CONVERSATION)
    raw = raw_continuation(client, ids, 10)
    # The answer holds the continuation only, as Anthropic's does.
    assert "".join(b.text for b in m.content if b.type == "text") == raw.choices[0].text.replace("<|im_end|>", "")
    assert m.usage.input_tokens == len(ids)
    count = claude.messages.count_tokens(model=MODEL_NAME, messages=CONVERSATION)
    assert count.input_tokens == len(ids)
    # Blocks too, and streamed the same.
    blocks = [CONVERSATION[0], {"role": "assistant", "content": [{"type": "text", "text": PREFIX}]}]
    with claude.messages.stream(model=MODEL_NAME, max_tokens=10, extra_body={"temperature": 0},
                                messages=blocks) as s:
        streamed = s.get_final_message()
    assert [(b.type, b.text) for b in streamed.content] == [(b.type, b.text) for b in m.content]


def test_anthropic_prefill_ending_in_whitespace_is_a_400(claude):
    with pytest.raises(anthropic.BadRequestError) as e:
        claude.messages.create(model=MODEL_NAME, max_tokens=4, messages=[
            CONVERSATION[0], {"role": "assistant", "content": PREFIX + " "}])
    assert "trailing whitespace" in str(e.value)
