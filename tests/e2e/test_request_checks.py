"""Request checks as OpenAI and vLLM make them (issue 41): a `developer` message speaks as the
system where the template has no developer role, an unknown role is a 400 naming it, and a
max_tokens that does not fit the context beside the prompt is a 400 naming the field and both
numbers, on every API (chat, completions, Responses, Messages)."""

import anthropic
import httpx
import openai
import pytest

from conftest import API_KEY, MAX_MODEL_LEN, MODEL_NAME, QWEN_NAME

CHAT = "/v1/chat/completions"


def prompt_tokens(url, messages):
    return httpx.post(url + "/tokenize", json={"messages": messages}).json()["tokens"]


def test_developer_speaks_as_system_where_the_template_has_no_developer_role(qwen_server):
    # Qwen2.5's template renders only the roles it tests for: a developer message vanished.
    user = {"role": "user", "content": "Hi"}
    as_developer = prompt_tokens(qwen_server.url, [{"role": "developer", "content": "Answer in French."}, user])
    as_system = prompt_tokens(qwen_server.url, [{"role": "system", "content": "Answer in French."}, user])
    assert as_developer == as_system
    assert as_developer != prompt_tokens(qwen_server.url, [user])


def test_an_unknown_role_is_a_400_naming_it(qwen):
    with pytest.raises(openai.BadRequestError) as e:
        qwen.chat.completions.create(model=QWEN_NAME, max_tokens=2,
                                     messages=[{"role": "user", "content": "a"}, {"role": "usr", "content": "b"}])
    error = e.value.body
    assert error["param"] == "messages[1].role" and "'usr'" in error["message"], error


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
def test_a_max_tokens_beyond_the_context_is_a_400_with_both_numbers(http, field):
    r = http.post(CHAT, json={"messages": [{"role": "user", "content": "hi"}], field: MAX_MODEL_LEN})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    prompt = len(http.post("/tokenize", json={"messages": [{"role": "user", "content": "hi"}]}).json()["tokens"])
    assert error["param"] == field and error["code"] == "invalid_value"
    assert f"({MAX_MODEL_LEN} > {MAX_MODEL_LEN} - {prompt})" in error["message"], error
    # What fits exactly is served.
    fits = http.post(CHAT, json={"messages": [{"role": "user", "content": "hi"}], field: MAX_MODEL_LEN - prompt,
                                 "stop": ["\n", "."], "temperature": 0})
    assert fits.status_code == 200, fits.text


def test_completions_responses_and_messages_refuse_it_too(server, http):
    r = http.post("/v1/completions", json={"prompt": "hi", "max_tokens": MAX_MODEL_LEN + 1})
    assert r.status_code == 400 and r.json()["error"]["param"] == "max_tokens", r.text
    r = http.post("/v1/responses", json={"model": MODEL_NAME, "input": "hi", "max_output_tokens": MAX_MODEL_LEN})
    assert r.status_code == 400 and r.json()["error"]["param"] == "max_output_tokens", r.text
    assert str(MAX_MODEL_LEN) in r.json()["error"]["message"]
    claude = anthropic.Anthropic(base_url=server.url, api_key=API_KEY, max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="max_tokens"):
        claude.messages.create(model=MODEL_NAME, max_tokens=MAX_MODEL_LEN, messages=[{"role": "user", "content": "hi"}])


def test_a_model_is_retrieved_by_its_id(server, client, http):
    card = client.models.retrieve(MODEL_NAME)
    assert card.id == MODEL_NAME and card.object == "model"
    assert card.model_extra["max_model_len"] == MAX_MODEL_LEN
    r = http.get("/v1/models/org/not-served")
    assert r.status_code == 404, r.text
    assert r.json()["error"]["code"] == "model_not_found" and "org/not-served" in r.json()["error"]["message"]
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")
