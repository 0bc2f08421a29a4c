"""Tool calls, reasoning and the refusal of unimplemented request fields, through the official
client. Qwen2.5-Coder-0.5B's template renders tools; greedy, it calls get_weather for the
weather question below (as a bare JSON object: this model never writes <tool_call> tags)."""

import json

import httpx
import openai
import pytest

from conftest import MODEL_NAME, QWEN_NAME, Server

CHAT = "/v1/chat/completions"
MSGS = [{"role": "user", "content": "hi"}]
WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city name"}},
                   "required": ["city"]}}}]
# Worded so that greedy 0.5B Qwen calls the tool: to "What's the weather in Paris?" it writes the
# call as a markdown JSON block once the tools render in the request's key order (as transformers
# renders them).
ASK = [{"role": "user", "content": "What is the weather in Paris right now?"}]


# --- fields that are not implemented are refused by name -------------------------------------

@pytest.mark.parametrize("field,value,says", [
    ("logits_processors", ["my.Processor"], "`logits_processors` is not supported: per-request"),
    ("mm_processor_kwargs", {"num_crops": 4}, "`mm_processor_kwargs` is not supported yet"),
    ("temprature", 0.5, "unknown field `temprature`"),
])
def test_an_unimplemented_field_is_a_400_naming_it(http, field, value, says):
    for path, body in [(CHAT, {"messages": MSGS}), ("/v1/completions", {"prompt": "hi"})]:
        r = http.post(path, json=body | {field: value, "max_tokens": 2})
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["param"] == field and err["message"].startswith(says), err


def test_fields_ignored_on_purpose_are_accepted(http):
    extra = {"user": "u-1", "metadata": {"k": "v"}, "store": False, "service_tier": "auto",
             "response_format": {"type": "text"}, "logit_bias": None}
    r = http.post(CHAT, json={"messages": MSGS, "max_tokens": 2} | extra)
    assert r.status_code == 200, r.text


def test_the_client_raises_for_unimplemented_features(client):
    with pytest.raises(openai.BadRequestError, match="prediction"):
        client.chat.completions.create(model=MODEL_NAME, messages=MSGS, max_tokens=2,
                                       prediction={"type": "content", "content": "hi"})


def test_tools_on_a_model_without_a_tool_format_are_refused(http):
    r = http.post(CHAT, json={"messages": MSGS, "tools": WEATHER})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tools"


TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Get the local time in a time zone",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET", "PST"]},
                                                    "hours24": {"type": "boolean"}},
                   "required": ["zone", "hours24"]}}}
GREETING = [{"role": "user", "content": "Write a short poem about the sea."}]


@pytest.mark.parametrize("choice", [{"type": "function", "function": {"name": "get_stock"}}])
def test_a_forced_choice_must_name_an_offered_tool(qwen, choice):
    with pytest.raises(openai.BadRequestError, match="get_stock"):
        qwen.chat.completions.create(model=QWEN_NAME, messages=ASK, tools=WEATHER, tool_choice=choice)


def test_a_forced_call_cannot_also_carry_a_response_format(qwen):
    with pytest.raises(openai.BadRequestError, match="tool_choice"):
        qwen.chat.completions.create(model=QWEN_NAME, messages=ASK, tools=WEATHER, tool_choice="required",
                                     response_format={"type": "json_object"})


def test_required_forces_a_call_where_the_model_would_answer_in_text(qwen):
    # One call, as `parallel_tool_calls=False` asks.
    kw = dict(model=QWEN_NAME, messages=GREETING, tools=WEATHER, temperature=0, max_tokens=80,
              parallel_tool_calls=False)
    free = complete_message(qwen, **kw)
    assert free[2] == [] and free[3] != "tool_calls", "without forcing, the model writes a poem"
    content, _, calls, finish = complete_message(qwen, tool_choice="required", **kw)
    assert finish == "tool_calls" and content is None
    assert [c["name"] for c in calls] == ["get_weather"]
    args = json.loads(calls[0]["arguments"])
    assert isinstance(args["city"], str)
    streamed = streamed_message(qwen, tool_choice="required", **kw)
    assert without_ids(streamed) == without_ids((content, None, calls, finish))


def choices_of(client, **kw):
    """Each choice of an n>1 answer as (content, calls, finish_reason), streamed or not."""
    if not kw.get("stream"):
        return [(c.message.content, [(t.function.name, t.function.arguments) for t in c.message.tool_calls or []],
                 c.finish_reason) for c in client.chat.completions.create(**kw).choices]
    content, calls, finish = {}, {}, {}
    for chunk in client.chat.completions.create(**kw):
        for c in chunk.choices:
            content[c.index] = content.get(c.index, "") + (c.delta.content or "")
            for tc in c.delta.tool_calls or []:
                name, args = calls.setdefault(c.index, {}).get(tc.index, (None, ""))
                calls[c.index][tc.index] = (tc.function.name or name, args + (tc.function.arguments or ""))
            finish[c.index] = c.finish_reason or finish.get(c.index)
    return [(content[i] or None, [calls.get(i, {})[j] for j in sorted(calls.get(i, {}))], finish[i])
            for i in sorted(finish)]


@pytest.mark.parametrize("parallel", [None, False])
def test_required_ends_where_the_model_ends_for_ten_seeds(qwen, parallel):
    # Ten seeded choices in one request (choice i samples with seed + i). Before the grammar let
    # the answer end after `</tool_call>\n`, most went on calling until max_tokens.
    kw = dict(model=QWEN_NAME, messages=ASK, tools=WEATHER + [TIME], tool_choice="required",
              temperature=1.0, seed=0, n=10, max_tokens=60)
    if parallel is not None:
        kw["parallel_tool_calls"] = parallel
    whole = choices_of(qwen, **kw)
    assert len(whole) == 10
    for content, calls, finish in whole:
        assert finish == "tool_calls" and content is None, (content, calls, finish)
        assert calls and (parallel is None or len(calls) == 1), calls
        for name, arguments in calls:
            assert name in ("get_weather", "get_time") and isinstance(json.loads(arguments), dict)
    assert choices_of(qwen, stream=True, **kw) == whole


@pytest.mark.parametrize("seed", range(3))
def test_a_named_choice_calls_that_tool_with_arguments_of_its_schema(qwen, seed):
    choice = {"type": "function", "function": {"name": "get_time"}}
    kw = dict(model=QWEN_NAME, messages=ASK, tools=WEATHER + [TIME], tool_choice=choice,
              temperature=1.0, seed=seed, max_tokens=80)
    content, _, calls, finish = complete_message(qwen, **kw)
    assert finish == "tool_calls" and [c["name"] for c in calls] == ["get_time"]
    args = json.loads(calls[0]["arguments"])
    assert args["zone"] in ("UTC", "CET", "PST") and isinstance(args["hours24"], bool)
    assert without_ids(streamed_message(qwen, **kw)) == without_ids((content, None, calls, finish))


# --- tool calls on Qwen2.5-Coder ---------------------------------------------------------------

def test_tools_are_rendered_into_the_prompt(qwen_server):
    url = qwen_server.url
    plain = httpx.post(url + "/tokenize", json={"messages": ASK}).json()["tokens"]
    with_tools = httpx.post(url + "/tokenize", json={"messages": ASK, "tools": WEATHER}).json()["tokens"]
    text = httpx.post(url + "/detokenize", json={"tokens": with_tools}).json()["prompt"]
    assert len(with_tools) > len(plain)
    assert "<tools>" in text and '"name": "get_weather"' in text


def streamed_message(client, **kw):
    """Joins a stream's deltas into (content, reasoning, calls, finish_reason)."""
    content, reasoning, calls, finish = "", "", {}, None
    for chunk in client.chat.completions.create(stream=True, **kw):
        for choice in chunk.choices:
            d = choice.delta
            content += d.content or ""
            reasoning += (d.model_extra or {}).get("reasoning_content") or ""
            for tc in d.tool_calls or []:
                call = calls.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
                if tc.id:
                    assert call["id"] is None, "a call's id comes once"
                    call["id"], call["name"] = tc.id, tc.function.name
                call["arguments"] += tc.function.arguments or ""
            finish = choice.finish_reason or finish
    return content or None, reasoning or None, [calls[i] for i in sorted(calls)], finish


def complete_message(client, **kw):
    r = client.chat.completions.create(**kw)
    m = r.choices[0].message
    calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in m.tool_calls or []]
    return m.content, (m.model_extra or {}).get("reasoning_content"), calls, r.choices[0].finish_reason


def without_ids(message):
    content, reasoning, calls, finish = message
    return content, reasoning, [(c["name"], c["arguments"]) for c in calls], finish


def test_greedy_weather_question_calls_the_tool_streamed_and_not(qwen):
    kw = dict(model=QWEN_NAME, messages=ASK, tools=WEATHER, temperature=0, max_tokens=60)
    content, _, calls, finish = complete_message(qwen, **kw)
    assert finish == "tool_calls" and content is None
    assert [c["name"] for c in calls] == ["get_weather"]
    assert json.loads(calls[0]["arguments"]) == {"city": "Paris"}
    assert calls[0]["id"].startswith("call_")
    assert without_ids(streamed_message(qwen, **kw)) == without_ids((content, None, calls, finish))


@pytest.mark.parametrize("seed", range(4))
def test_streamed_and_complete_answers_agree_for_a_seed(qwen, seed):
    kw = dict(model=QWEN_NAME, messages=ASK, tools=WEATHER, temperature=0.8, seed=seed, max_tokens=60)
    whole = complete_message(qwen, **kw)
    assert without_ids(streamed_message(qwen, **kw)) == without_ids(whole)
    assert (whole[3] == "tool_calls") == bool(whole[2])


def test_a_tool_result_conversation_renders_and_answers(qwen, qwen_server):
    history = ASK + [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "22C and sunny"},
    ]
    body = {"messages": history, "tools": WEATHER}
    tokens = httpx.post(qwen_server.url + "/tokenize", json=body).json()["tokens"]
    text = httpx.post(qwen_server.url + "/detokenize", json={"tokens": tokens}).json()["prompt"]
    # The call as the template writes it (arguments as an object), the result as a tool response.
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in text
    assert "<|im_start|>user\n<tool_response>\n22C and sunny\n</tool_response><|im_end|>" in text
    r = qwen.chat.completions.create(model=QWEN_NAME, messages=history, tools=WEATHER,
                                     temperature=0, max_tokens=30)
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")


def test_tool_choice_none_reads_no_calls(qwen):
    r = qwen.chat.completions.create(model=QWEN_NAME, messages=ASK, tools=WEATHER, tool_choice="none",
                                     temperature=0, max_tokens=60)
    assert r.choices[0].message.tool_calls is None
    assert r.choices[0].finish_reason == "stop"
    assert "get_weather" in r.choices[0].message.content


def test_reserved_template_variables_cannot_be_overridden(qwen):
    with pytest.raises(openai.BadRequestError, match="chat_template_kwargs"):
        qwen.chat.completions.create(model=QWEN_NAME, messages=ASK, max_tokens=2,
                                     extra_body={"chat_template_kwargs": {"messages": []}})
    r = qwen.chat.completions.create(model=QWEN_NAME, messages=ASK, max_tokens=2,
                                     extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert r.choices[0].finish_reason == "length"


# --- reasoning ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def r1_client(tmp_path_factory):
    """SmolLM2 read as DeepSeek-R1 output: no </think> ever comes, so everything is reasoning."""
    s = Server(["--reasoning-parser", "deepseek_r1"], tmp_path_factory.mktemp("r1"), "r1")
    yield openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=120)
    s.stop()


def test_reasoning_is_kept_apart_streamed_and_not(r1_client):
    kw = dict(model=MODEL_NAME, messages=ASK, temperature=0, max_tokens=12)
    whole = complete_message(r1_client, **kw)
    content, reasoning, calls, finish = whole
    assert content is None and reasoning and not calls and finish == "length"
    raw = r1_client.chat.completions.create(model=MODEL_NAME, messages=ASK, temperature=0, max_tokens=12)
    assert raw.choices[0].message.model_extra["reasoning"] == reasoning
    assert streamed_message(r1_client, **kw) == whole
