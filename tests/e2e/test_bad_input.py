"""Every bad request gets a 4xx with an OpenAI error body, and the server stays up."""

import pytest

from conftest import MAX_MODEL_LEN, MODEL_NAME

CHAT = "/v1/chat/completions"
COMP = "/v1/completions"
MSGS = [{"role": "user", "content": "hi"}]

CASES = [
    ("malformed json", COMP, b'{"prompt": "hi", ', 400),
    ("not an object", COMP, b"[1, 2]", 400),
    ("wrong type", COMP, {"prompt": "hi", "max_tokens": "ten"}, 400),
    ("wrong type chat", CHAT, {"messages": "hi"}, 400),
    ("missing prompt", COMP, {"model": MODEL_NAME}, 400),
    ("unknown model", COMP, {"model": "gpt-17", "prompt": "hi"}, 404),
    ("unknown model chat", CHAT, {"model": "gpt-17", "messages": MSGS}, 404),
    ("empty prompt", COMP, {"prompt": ""}, 400),
    ("empty prompt list", COMP, {"prompt": []}, 400),
    ("empty messages", CHAT, {"messages": []}, 400),
    ("prompt too long", COMP, {"prompt": [100] * (MAX_MODEL_LEN + 5)}, 400),
    ("max_tokens 0", COMP, {"prompt": "hi", "max_tokens": 0}, 400),
    ("max_tokens negative", CHAT, {"messages": MSGS, "max_tokens": -3}, 400),
    ("n too large", CHAT, {"messages": MSGS, "n": 17}, 400),
    ("n zero", COMP, {"prompt": "hi", "n": 0}, 400),
    ("temperature negative", CHAT, {"messages": MSGS, "temperature": -0.1}, 400),
    ("temperature too big", COMP, {"prompt": "hi", "temperature": 2.5}, 400),
    ("top_p zero", CHAT, {"messages": MSGS, "top_p": 0}, 400),
    ("top_p above one", COMP, {"prompt": "hi", "top_p": 1.01}, 400),
    ("top_logprobs 21", CHAT, {"messages": MSGS, "logprobs": True, "top_logprobs": 21}, 400),
    ("completions logprobs 21", COMP, {"prompt": "hi", "logprobs": 21}, 400),
    ("token id out of vocab", COMP, {"prompt": [1, 49152]}, 400),
    ("negative token id", COMP, {"prompt": [1, -1]}, 400),
    ("image content", CHAT, {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400),
    ("detokenize bad id", "/detokenize", {"tokens": [10**6]}, 400),
    ("unknown route", "/v1/nothing", {}, 404),
]


@pytest.mark.parametrize("name,path,body,status", CASES, ids=[c[0] for c in CASES])
def test_bad_request(http, server, name, path, body, status):
    if isinstance(body, bytes):
        r = http.post(path, content=body, headers={"Content-Type": "application/json"})
    else:
        r = http.post(path, json=body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert isinstance(err["message"], str) and err["message"]
    assert server.alive()


def test_too_long_prompt_names_both_lengths(http):
    n = MAX_MODEL_LEN + 5
    msg = http.post(COMP, json={"prompt": [100] * n}).json()["error"]["message"]
    assert str(MAX_MODEL_LEN) in msg and str(n) in msg


def test_openai_client_raises_typed_errors(client):
    import openai
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODEL_NAME, messages=MSGS, temperature=-1)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=MSGS)
