"""OpenAI's deprecated `functions` / `function_call` on Qwen2.5-Coder, through the official
client: answered in the legacy shape (`message.function_call`, `finish_reason:
"function_call"`), the same call as the `tools` request it maps to, streamed the same, and a
legacy conversation rendered as its `tool_calls` / `tool` equivalent."""

import json

import httpx

from conftest import QWEN_NAME

FUNCTIONS = [{"name": "get_weather", "description": "Get the current weather in a city",
              "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city name"}},
                             "required": ["city"]}}]
TOOLS = [{"type": "function", "function": f} for f in FUNCTIONS]
ASK = [{"role": "user", "content": "What is the weather in Paris right now?"}]


def test_a_named_function_call_is_answered_in_the_legacy_shape(qwen):
    kw = dict(model=QWEN_NAME, messages=ASK, max_tokens=64, temperature=0)
    r = qwen.chat.completions.create(functions=FUNCTIONS, function_call={"name": "get_weather"}, **kw)
    c = r.choices[0]
    assert c.finish_reason == "function_call"
    assert c.message.tool_calls is None
    assert c.message.function_call.name == "get_weather"
    assert "paris" in json.loads(c.message.function_call.arguments)["city"].lower()
    # The tools request it maps to makes the same call.
    modern = qwen.chat.completions.create(
        tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}},
        parallel_tool_calls=False, **kw).choices[0]
    assert modern.finish_reason == "tool_calls"
    assert modern.message.tool_calls[0].function.arguments == c.message.function_call.arguments
    # Streamed: the same call in function_call deltas.
    name, arguments, finish = "", "", None
    for chunk in qwen.chat.completions.create(functions=FUNCTIONS, function_call={"name": "get_weather"},
                                              stream=True, **kw):
        for ch in chunk.choices:
            assert not ch.delta.tool_calls
            if ch.delta.function_call:
                name += ch.delta.function_call.name or ""
                arguments += ch.delta.function_call.arguments or ""
            finish = ch.finish_reason or finish
    assert (name, arguments, finish) == ("get_weather", c.message.function_call.arguments, "function_call")


def test_function_call_auto_and_none(qwen):
    kw = dict(model=QWEN_NAME, messages=ASK, max_tokens=64, temperature=0, functions=FUNCTIONS)
    auto = qwen.chat.completions.create(**kw).choices[0]
    modern = qwen.chat.completions.create(model=QWEN_NAME, messages=ASK, max_tokens=64, temperature=0,
                                          tools=TOOLS, parallel_tool_calls=False).choices[0]
    if modern.message.tool_calls:
        assert auto.finish_reason == "function_call"
        assert auto.message.function_call.arguments == modern.message.tool_calls[0].function.arguments
    else:
        assert auto.message.content == modern.message.content
    none = qwen.chat.completions.create(function_call="none", **kw).choices[0]
    assert none.message.function_call is None and none.finish_reason in ("stop", "length")


def test_a_legacy_conversation_renders_as_tool_calls_and_tool_results(qwen_server):
    http = httpx.Client(base_url=qwen_server.url, timeout=60)
    args = '{"city": "Paris"}'
    legacy = ASK + [{"role": "assistant", "content": None,
                     "function_call": {"name": "get_weather", "arguments": args}},
                    {"role": "function", "name": "get_weather", "content": "22C and sunny"}]
    modern = ASK + [{"role": "assistant", "content": None, "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": args}}]},
                    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "22C and sunny"}]
    tokens = lambda messages: http.post("/tokenize", json={"messages": messages, "tools": TOOLS}).json()["tokens"]
    assert tokens(legacy) == tokens(modern)
    text = http.post("/detokenize", json={"tokens": tokens(legacy)}).json()["prompt"]
    assert "<tool_response>\n22C and sunny\n</tool_response>" in text
    # And the chat route answers it (the function's result read).
    r = http.post("/v1/chat/completions", json={"model": QWEN_NAME, "messages": legacy, "functions": FUNCTIONS,
                                                "max_tokens": 24, "temperature": 0})
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["prompt_tokens"] == len(tokens(legacy))


def test_mixing_legacy_and_tools_is_a_400(qwen_server):
    http = httpx.Client(base_url=qwen_server.url, timeout=60)
    for extra, param in [({"tools": TOOLS}, "tools"), ({"parallel_tool_calls": True}, "parallel_tool_calls")]:
        r = http.post("/v1/chat/completions", json={"model": QWEN_NAME, "messages": ASK, "max_tokens": 4,
                                                    "functions": FUNCTIONS, **extra})
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
    r = http.post("/v1/chat/completions", json={"model": QWEN_NAME, "messages": ASK, "max_tokens": 4,
                                                "function_call": "auto"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "function_call", r.text
