"""Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens) through the official
`anthropic` client: plain answers agree with OpenAI's chat route on the same model (same text,
same token counts), tools on Qwen2.5-Coder (forced calls, a tool-result round trip), streaming
agrees with the complete answer, count_tokens with usage, and errors are Anthropic's."""

import json
import os
import time

import anthropic
import httpx
import jsonschema
import openai
import pytest

from conftest import API_KEY, MODEL_NAME, QWEN_NAME, Server, metric

# The client (2.x) has no `temperature` argument any more; the API field is still Anthropic's.
GREEDY = {"temperature": 0}
HI = [{"role": "user", "content": "hi"}]
ASK = [{"role": "user", "content": "What's the weather in Paris?"}]
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "description": "The city name"}},
                  "required": ["city"]}
WEATHER = [{"name": "get_weather", "description": "Get the current weather in a city",
            "input_schema": WEATHER_SCHEMA}]
OPENAI_WEATHER = [{"type": "function", "function": {"name": "get_weather",
                   "description": "Get the current weather in a city", "parameters": WEATHER_SCHEMA}}]


@pytest.fixture(scope="module")
def claude(server) -> anthropic.Anthropic:
    """The SmolLM2 server (which wants an API key: the client sends it as x-api-key)."""
    return anthropic.Anthropic(base_url=server.url, api_key=API_KEY, max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def qwen_claude(qwen_server) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=qwen_server.url, api_key="unused", max_retries=0, timeout=120)


def text_of(message) -> str:
    return "".join(b.text for b in message.content if b.type == "text")


# --- complete answers ---------------------------------------------------------------------------

def test_a_plain_message_matches_the_chat_route(claude, client):
    m = claude.messages.create(model=MODEL_NAME, max_tokens=24, extra_body=GREEDY, messages=HI)
    assert m.type == "message" and m.role == "assistant" and m.model == MODEL_NAME
    assert m.id.startswith("msg_")
    assert [b.type for b in m.content] == ["text"] and m.content[0].text.strip()
    chat = client.chat.completions.create(model=MODEL_NAME, max_tokens=24, temperature=0, messages=HI)
    assert m.content[0].text == chat.choices[0].message.content
    assert m.usage.input_tokens == chat.usage.prompt_tokens
    assert m.usage.output_tokens == chat.usage.completion_tokens
    want = {"stop": "end_turn", "length": "max_tokens"}[chat.choices[0].finish_reason]
    assert m.stop_reason == want and m.stop_sequence is None


def test_max_tokens_cuts_the_answer(claude):
    m = claude.messages.create(model=MODEL_NAME, max_tokens=3, extra_body=GREEDY,
                               messages=[{"role": "user", "content": "Tell me a long story."}])
    assert m.stop_reason == "max_tokens" and m.usage.output_tokens == 3


def test_a_system_prompt_is_rendered_as_the_system_message(claude, client):
    system = "You are a pirate. Answer like a pirate."
    m = claude.messages.create(model=MODEL_NAME, max_tokens=20, extra_body=GREEDY, system=system, messages=HI)
    chat = client.chat.completions.create(model=MODEL_NAME, max_tokens=20, temperature=0,
                                          messages=[{"role": "system", "content": system}] + HI)
    assert text_of(m) == chat.choices[0].message.content
    assert m.usage.input_tokens == chat.usage.prompt_tokens
    # SmolLM2's template writes its own default system prompt when none is given.
    plain = claude.messages.count_tokens(model=MODEL_NAME, messages=HI).input_tokens
    assert m.usage.input_tokens != plain
    # Text blocks render as the string does.
    blocks = claude.messages.count_tokens(model=MODEL_NAME, messages=HI,
                                          system=[{"type": "text", "text": system}])
    assert blocks.input_tokens == m.usage.input_tokens


def test_a_stop_sequence_stops_the_answer_and_is_named(claude):
    kw = dict(model=MODEL_NAME, max_tokens=40, extra_body=GREEDY,
              messages=[{"role": "user", "content": "Tell me a long story."}])
    full = text_of(claude.messages.create(**kw))
    words = full.split()
    assert len(words) > 4, full
    stop = words[3]
    m = claude.messages.create(stop_sequences=[stop], **kw)
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == stop
    assert text_of(m) == full[:full.index(stop)]
    assert m.usage.output_tokens < 40


def test_count_tokens_is_the_prompt_of_the_same_request(claude, qwen_claude):
    history = HI + [{"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "How are you?"}]
    m = claude.messages.create(model=MODEL_NAME, max_tokens=2, system="Be brief.", messages=history)
    counted = claude.messages.count_tokens(model=MODEL_NAME, system="Be brief.", messages=history)
    assert counted.input_tokens == m.usage.input_tokens > 0
    kw = dict(model=QWEN_NAME, messages=ASK, tools=WEATHER)
    with_tools = qwen_claude.messages.create(max_tokens=2, **kw)
    assert qwen_claude.messages.count_tokens(**kw).input_tokens == with_tools.usage.input_tokens
    assert qwen_claude.messages.count_tokens(model=QWEN_NAME, messages=ASK).input_tokens < \
        with_tools.usage.input_tokens


# --- tools on Qwen2.5-Coder ---------------------------------------------------------------------

@pytest.mark.parametrize("choice", [{"type": "tool", "name": "get_weather"},
                                    {"type": "any", "disable_parallel_tool_use": True}])
def test_a_forced_tool_choice_gives_a_tool_use_block(qwen_claude, choice):
    m = qwen_claude.messages.create(model=QWEN_NAME, max_tokens=60, extra_body=GREEDY, messages=ASK,
                                    tools=WEATHER, tool_choice=choice)
    assert [b.type for b in m.content] == ["tool_use"], m.content
    call = m.content[0]
    assert call.name == "get_weather" and call.id.startswith("toolu_")
    jsonschema.validate(call.input, WEATHER_SCHEMA)
    assert call.input == {"city": "Paris"}
    assert m.stop_reason == "tool_use"


def test_any_tool_choice_may_call_several_times(qwen_claude):
    # Parallel calls allowed: the answer ends where the model ends the list (it used to go on
    # calling until max_tokens, with the half-written call as text).
    kw = dict(model=QWEN_NAME, max_tokens=60, extra_body=GREEDY, messages=ASK, tools=WEATHER,
              tool_choice={"type": "any"})
    m = qwen_claude.messages.create(**kw)
    assert m.stop_reason == "tool_use" and [b.type for b in m.content] == ["tool_use"], m.content
    with qwen_claude.messages.stream(**kw) as stream:
        streamed = stream.get_final_message()
    assert [(b.type, b.name, b.input) for b in streamed.content] == \
        [(b.type, b.name, b.input) for b in m.content] and streamed.stop_reason == "tool_use"
    calls = [b for b in m.content if b.type == "tool_use"]
    assert calls and calls[0].input == {"city": "Paris"}, m.content
    for call in calls:
        assert call.name == "get_weather"
        jsonschema.validate(call.input, WEATHER_SCHEMA)
    assert len({c.id for c in calls}) == len(calls)


def test_a_forced_call_is_made_even_where_the_model_would_not_call(qwen_claude):
    m = qwen_claude.messages.create(model=QWEN_NAME, max_tokens=60, extra_body=GREEDY,
                                    messages=[{"role": "user", "content": "Say hello."}],
                                    tools=WEATHER, tool_choice={"type": "tool", "name": "get_weather"})
    assert [b.type for b in m.content] == ["tool_use"] and m.stop_reason == "tool_use"
    jsonschema.validate(m.content[0].input, WEATHER_SCHEMA)


def test_a_tool_result_round_trip_renders_and_answers(qwen_claude, qwen_server, qwen):
    history = ASK + [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "get_weather",
                                           "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01",
                                      "content": "22C and sunny"}]},
    ]
    # The conversation renders as the OpenAI-style one with a call and a tool message does.
    openai_history = ASK + [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "toolu_01", "type": "function",
         "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]},
        {"role": "tool", "tool_call_id": "toolu_01", "content": "22C and sunny"},
    ]
    tokens = httpx.post(qwen_server.url + "/tokenize",
                        json={"messages": openai_history, "tools": OPENAI_WEATHER}).json()["tokens"]
    counted = qwen_claude.messages.count_tokens(model=QWEN_NAME, messages=history, tools=WEATHER)
    assert counted.input_tokens == len(tokens)
    m = qwen_claude.messages.create(model=QWEN_NAME, max_tokens=40, extra_body=GREEDY, messages=history,
                                    tools=WEATHER)
    assert m.usage.input_tokens == len(tokens) and m.usage.output_tokens > 0
    # The same answer as the OpenAI route's for the same conversation (the 0.5B model repeats
    # the call rather than reading the result, so the answer's wording is not asserted).
    chat = qwen.chat.completions.create(model=QWEN_NAME, max_tokens=40, temperature=0,
                                        messages=openai_history, tools=OPENAI_WEATHER)
    reply = chat.choices[0].message
    assert text_of(m) == (reply.content or "")
    assert [b.name for b in m.content if b.type == "tool_use"] == \
        [c.function.name for c in reply.tool_calls or []]
    want = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
    assert m.stop_reason == want[chat.choices[0].finish_reason]


# --- streaming ----------------------------------------------------------------------------------

def test_the_stream_joins_to_the_complete_answer(claude):
    kw = dict(model=MODEL_NAME, max_tokens=30, extra_body=GREEDY, system="Be brief.", messages=HI)
    whole = claude.messages.create(**kw)
    with claude.messages.stream(**kw) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed == text_of(whole) and streamed
    assert [(b.type, b.text) for b in final.content] == [(b.type, b.text) for b in whole.content]
    assert (final.stop_reason, final.usage.input_tokens, final.usage.output_tokens) == \
        (whole.stop_reason, whole.usage.input_tokens, whole.usage.output_tokens)


def test_stream_events_come_in_anthropics_order(server):
    body = {"model": MODEL_NAME, "max_tokens": 8, "temperature": 0, "messages": HI, "stream": True}
    r = httpx.post(server.url + "/v1/messages", json=body, headers={"x-api-key": API_KEY}, timeout=60)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    names, datas = [], []
    for line in r.text.splitlines():
        if line.startswith("event: "):
            names.append(line[len("event: "):])
        elif line.startswith("data: "):
            datas.append(json.loads(line[len("data: "):]))
    assert [d["type"] for d in datas] == names
    # A ping right after the start, as Anthropic's streams send one (and more while idle).
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert datas[1] == {"type": "ping"}
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(names[3:-3]) == {"content_block_delta"}
    assert datas[-2]["delta"] == {"stop_reason": "max_tokens", "stop_sequence": None}
    assert datas[-2]["usage"] == {"output_tokens": 8}


def test_a_streamed_forced_call_joins_to_the_same_input(qwen_claude):
    kw = dict(model=QWEN_NAME, max_tokens=60, extra_body=GREEDY, messages=ASK, tools=WEATHER,
              tool_choice={"type": "tool", "name": "get_weather"})
    whole = qwen_claude.messages.create(**kw)
    parts, starts = [], []
    with qwen_claude.messages.stream(**kw) as stream:
        for event in stream:
            if event.type == "content_block_start":
                starts.append(event.content_block)
            elif event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                parts.append(event.delta.partial_json)
        final = stream.get_final_message()
    assert [b.type for b in starts] == ["tool_use"] and starts[0].name == "get_weather"
    assert json.loads("".join(parts)) == whole.content[0].input
    assert final.content[0].input == whole.content[0].input and final.stop_reason == "tool_use"


def test_a_client_that_disconnects_mid_stream_is_aborted(claude, http):
    kw = dict(model=MODEL_NAME, max_tokens=1000, extra_body=GREEDY,
              messages=[{"role": "user", "content": "Tell me a long story."}])
    with claude.messages.stream(**kw) as stream:
        for i, _ in enumerate(stream.text_stream):
            if i >= 3:
                break
        assert metric(http, "ferrite:num_requests_running") >= 1
    deadline = time.time() + 1.0
    while time.time() < deadline and metric(http, "ferrite:num_requests_running") != 0:
        time.sleep(0.05)
    assert metric(http, "ferrite:num_requests_running") == 0


# --- reasoning ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def r1_claude(tmp_path_factory):
    """SmolLM2 read as DeepSeek-R1 output: no </think> ever comes, so everything is reasoning."""
    s = Server(["--reasoning-parser", "deepseek_r1"], tmp_path_factory.mktemp("r1m"), "r1m")
    yield anthropic.Anthropic(base_url=s.url, api_key="unused", max_retries=0, timeout=120)
    s.stop()


def test_reasoning_is_a_thinking_block_streamed_and_not(r1_claude):
    kw = dict(model=MODEL_NAME, max_tokens=12, extra_body=GREEDY,
              messages=[{"role": "user", "content": "Tell me a long story."}])
    whole = r1_claude.messages.create(**kw)
    assert [b.type for b in whole.content] == ["thinking"] and whole.content[0].thinking.strip()
    assert whole.stop_reason == "max_tokens"
    thinking = []
    with r1_claude.messages.stream(**kw) as stream:
        for event in stream:
            if event.type == "content_block_delta":
                assert event.delta.type == "thinking_delta"
                thinking.append(event.delta.thinking)
    assert "".join(thinking) == whole.content[0].thinking


# --- errors -------------------------------------------------------------------------------------

def test_missing_max_tokens_is_a_400(claude):
    with pytest.raises(anthropic.BadRequestError, match="max_tokens") as e:
        claude.post("/v1/messages", cast_to=httpx.Response, body={"model": MODEL_NAME, "messages": HI})
    assert e.value.body == {"type": "error", "error": {"type": "invalid_request_error",
                                                       "message": "`max_tokens` is required"}}


@pytest.mark.parametrize("messages,says", [
    ([{"role": "user", "content": [{"type": "text", "text": "What is this?"},
      {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}],
     "messages[0].content[1]: content blocks of type `image`"),
    # A prefill is continued (test_prefill.py), but not from trailing whitespace.
    ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "The answer is "}],
     "trailing whitespace"),
    ([{"role": "tool", "content": "hi"}], "messages[0].role"),
])
def test_unreadable_messages_are_a_400_naming_them(claude, messages, says):
    with pytest.raises(anthropic.BadRequestError, match=r"messages") as e:
        claude.messages.create(model=MODEL_NAME, max_tokens=4, messages=messages)
    assert says in e.value.body["error"]["message"]


def test_unknown_and_unimplemented_fields_are_refused_by_name(claude):
    with pytest.raises(anthropic.BadRequestError, match="unknown field `temprature`"):
        claude.messages.create(model=MODEL_NAME, max_tokens=4, messages=HI, extra_body={"temprature": 0})
    with pytest.raises(anthropic.BadRequestError, match="`mcp_servers` is not supported yet"):
        claude.messages.create(model=MODEL_NAME, max_tokens=4, messages=HI, extra_body={"mcp_servers": []})
    # Without a reasoning parser there are no thinking blocks to answer with.
    with pytest.raises(anthropic.BadRequestError, match="thinking"):
        claude.messages.create(model=MODEL_NAME, max_tokens=2000, messages=HI,
                               thinking={"type": "enabled", "budget_tokens": 1024})
    # Bookkeeping fields are accepted and change nothing.
    # Greedy: a sampled answer to "hi" may end within 4 tokens.
    m = claude.messages.create(model=MODEL_NAME, max_tokens=4, messages=HI, metadata={"user_id": "u-1"},
                               thinking={"type": "disabled"}, extra_body=GREEDY)
    assert m.stop_reason == "max_tokens"


def test_other_errors_have_anthropics_types(server, claude):
    with pytest.raises(anthropic.NotFoundError, match="claude-3"):
        claude.messages.create(model="claude-3", max_tokens=4, messages=HI)
    wrong_key = anthropic.Anthropic(base_url=server.url, api_key="nope", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as e:
        wrong_key.messages.create(model=MODEL_NAME, max_tokens=4, messages=HI)
    assert e.value.body["type"] == "error" and e.value.body["error"]["type"] == "authentication_error"
    with pytest.raises(anthropic.BadRequestError, match="tool_choice"):
        claude.messages.create(model=MODEL_NAME, max_tokens=4, messages=HI,
                               tool_choice={"type": "any"})
    # x-api-key is for the Messages routes only; the OpenAI routes keep Bearer.
    r = httpx.post(server.url + "/v1/chat/completions", headers={"x-api-key": API_KEY},
                   json={"messages": HI, "max_tokens": 2})
    assert r.status_code == 401 and "error" in r.json() and "type" not in r.json()
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=server.url + "/v1", api_key="nope", max_retries=0).models.list()
    assert server.alive()


@pytest.fixture(scope="module")
def think_token_server(tmp_path_factory):
    """SmolLM2 as a Hugging Face directory whose tokenizer has `</think>` as one special token,
    read as DeepSeek-R1 output: the model never writes that token
    by itself, so only a thinking budget ends its reasoning."""
    import shutil
    import subprocess
    from conftest import MODEL_FILE, ROOT, free_port, wait_healthy
    from test_hub import hf_dir_of
    src = hf_dir_of(MODEL_FILE)
    d = tmp_path_factory.mktemp("think")
    for f in src.iterdir():
        if f.suffix == ".safetensors":
            (d / f.name).symlink_to(f)
        else:
            shutil.copy(f, d / f.name)
    # The last of SmolLM2's special tokens (no merge makes it) becomes `</think>`.
    tok = json.loads((d / "tokenizer.json").read_text())
    special = max(tok["added_tokens"], key=lambda t: t["id"])
    end_id, vocab = special["id"], tok["model"]["vocab"]
    del vocab[special["content"]]
    vocab["</think>"] = end_id
    special["content"] = "</think>"
    (d / "tokenizer.json").write_text(json.dumps(tok))
    port, log_path = free_port(), d / "server.log"
    binary = os.environ.get("FERRITE_BIN", str(ROOT / "target/release/ferrite"))
    proc = subprocess.Popen([binary, "serve", str(d), "--port", str(port), "--served-model-name",
                             MODEL_NAME, "--reasoning-parser", "deepseek_r1", "--log-format", "json",
                             "--log-token-ids", "--max-model-len", "2048",
                             "--kv-cache-memory", "256MiB"],
                            stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(proc, url, log_path, timeout=120)
    yield url, log_path, end_id
    proc.terminate()
    proc.wait(timeout=10)
    assert "panicked" not in log_path.read_text()


def test_a_thinking_budget_ends_the_thinking_block_at_the_budget(think_token_server):
    url, log_path, end_id = think_token_server
    claude = anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0, timeout=300)
    r = claude.messages.create(model=MODEL_NAME, max_tokens=1100,
                               thinking={"type": "enabled", "budget_tokens": 1024},
                               messages=[{"role": "user", "content": "Tell me a long story."}])
    assert r.content[0].type == "thinking" and r.content[0].thinking.strip()
    time.sleep(0.3)
    [line] = [json.loads(l) for l in log_path.read_text().splitlines() if "request finished" in l]
    output = json.loads(line["output_token_ids"])
    # The reasoning ran to its budget, then the end of thinking came, and the answer after it.
    assert end_id not in output[:1024] and output[1024] == end_id, output[1020:1030]
    assert r.usage.output_tokens == len(output) > 1024
