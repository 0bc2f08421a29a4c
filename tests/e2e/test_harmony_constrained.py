"""gpt-oss (harmony) under constraints, through the official openai client: `tool_choice`
"required" and named functions force a call message
(`<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>`), structured
outputs hold the final message (`<|channel|>final<|message|>{...}<|return|>`), each optionally
after one bounded analysis message.

The model: fixtures/arch/gpt_oss's config with gpt-oss's vocabulary (201088) and random weights
(`--load-format dummy`), the o200k_harmony tokenizer cut to the harmony rendering tests' tokens
(every printable ASCII character among them; ids as openai-harmony's), gpt-oss's chat template
(so the native harmony renderer and the harmony parsers are picked as for the real model) and
gpt-oss's end tokens. A random model writes nonsense, but only what the grammar allows.

The oracles: the schema (jsonschema), and openai-harmony's parser applied to the generated token
ids (`return_token_ids`) where openai-harmony is at hand (HARMONY_PYTHON, default
/work/venv-harmony/bin/python, with TIKTOKEN_ENCODINGS_BASE, default /work/tiktoken-encodings,
holding o200k_base.tiktoken: see scripts/make_harmony_fixtures.py); those checks skip otherwise.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import jsonschema
import openai
import pytest

from conftest import ROOT, free_port, wait_healthy

HARMONY = ROOT / "crates/server/tests/fixtures/harmony"
NAME = "gpt-oss-tiny"
# Large enough for the analysis (at most half of it) and the constrained message after it.
MAX_TOKENS = 240
CALL, RETURN = 200012, 200002

WEATHER_PARAMS = {
    "type": "object",
    "properties": {
        "location": {"type": "string", "maxLength": 12},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["location", "unit"],
    "additionalProperties": False,
}
TIME_PARAMS = {
    "type": "object",
    "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
    "required": ["zone"],
    "additionalProperties": False,
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "The weather",
                                      "parameters": WEATHER_PARAMS}},
    {"type": "function", "function": {"name": "get_time", "parameters": TIME_PARAMS}},
]
SCHEMAS = {"get_weather": WEATHER_PARAMS, "get_time": TIME_PARAMS}
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 10},
        "days": {"type": "integer", "minimum": 1, "maximum": 9},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]


def model_dir(tmp: Path) -> Path:
    """fixtures/arch/gpt_oss's shape with gpt-oss's vocabulary, tokenizer and template."""
    config = json.loads((ROOT / "fixtures/arch/gpt_oss/config.json").read_text())
    config.update(vocab_size=201088, eos_token_id=RETURN, pad_token_id=199999)
    (tmp / "config.json").write_text(json.dumps(config))
    shutil.copy(HARMONY / "o200k_harmony_subset.tokenizer.json", tmp / "tokenizer.json")
    (tmp / "tokenizer_config.json").write_text(json.dumps({
        "chat_template": (HARMONY / "gpt-oss-chat_template.jinja").read_text(),
        "eos_token": "<|return|>", "pad_token": "<|endoftext|>", "bos_token": "<|startoftext|>",
    }))
    # gpt-oss's generation_config.json: `<|return|>`, `<|endoftext|>`, `<|call|>`.
    (tmp / "generation_config.json").write_text(json.dumps({"eos_token_id": [RETURN, 199999, CALL]}))
    return tmp


@pytest.fixture(scope="module")
def gpt_oss(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpt_oss")
    d = model_dir(tmp)
    binary = os.environ.get("FERRITE_BIN", str(ROOT / "target/release/ferrite"))
    port = free_port()
    log_path = tmp / "server.log"
    log = open(log_path, "w")
    # The cut tokenizer has holes in its ids, which the tokenizers crate warns about at length.
    env = dict(os.environ, RUST_LOG="info,tokenizers=error")
    proc = subprocess.Popen(
        [binary, "serve", str(d / "config.json"), "--load-format", "dummy", "--tokenizer", str(d),
         "--served-model-name", NAME, "--port", str(port), "--max-model-len", "2048",
         "--kv-cache-memory", "256MiB", "--harmony-date", "2025-06-28"],
        stdout=log, stderr=subprocess.STDOUT, env=env,
    )
    url = f"http://127.0.0.1:{port}"
    wait_healthy(proc, url, log_path)
    yield openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()
    assert "panicked" not in log_path.read_text()


# --- openai-harmony, the parser's oracle -------------------------------------------------------

HARMONY_PYTHON = os.environ.get("HARMONY_PYTHON", "/work/venv-harmony/bin/python")
ENCODINGS = os.environ.get("TIKTOKEN_ENCODINGS_BASE", "/work/tiktoken-encodings")
PARSE = """
import json, sys
from openai_harmony import HarmonyEncodingName, Role, load_harmony_encoding
enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
out = []
for tokens in json.load(sys.stdin):
    out.append([{"channel": m.channel, "recipient": m.recipient, "content_type": m.content_type,
                 "text": "".join(c.text for c in m.content)}
                for m in enc.parse_messages_from_completion_tokens(tokens, Role.ASSISTANT)])
print(json.dumps(out))
"""


def harmony_messages(token_ids: list[int]) -> list[dict]:
    """The messages openai-harmony parses from a completion's tokens."""
    if not (Path(HARMONY_PYTHON).is_file() and (Path(ENCODINGS) / "o200k_base.tiktoken").is_file()):
        pytest.skip("openai-harmony is not at hand (HARMONY_PYTHON, TIKTOKEN_ENCODINGS_BASE)")
    done = subprocess.run([HARMONY_PYTHON, "-c", PARSE], input=json.dumps([token_ids]), text=True,
                          capture_output=True, env=dict(os.environ, TIKTOKEN_ENCODINGS_BASE=ENCODINGS),
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)[0]


# --- chat completions --------------------------------------------------------------------------

def complete(client, **kw):
    r = client.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=MAX_TOKENS,
                                       temperature=0, extra_body={"return_token_ids": True}, **kw)
    choice = r.choices[0]
    m = choice.message
    calls = [(c.function.name, c.function.arguments) for c in m.tool_calls or []]
    extra = m.model_extra or {}
    return {"content": m.content, "reasoning": extra.get("reasoning_content"), "calls": calls,
            "finish": choice.finish_reason, "token_ids": (choice.model_extra or {}).get("token_ids")}


def streamed(client, **kw):
    content, reasoning, calls, finish, ids = "", "", {}, None, []
    stream = client.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=MAX_TOKENS,
                                            temperature=0, stream=True,
                                            extra_body={"return_token_ids": True}, **kw)
    for chunk in stream:
        for c in chunk.choices:
            d = c.delta
            content += d.content or ""
            reasoning += (d.model_extra or {}).get("reasoning_content") or ""
            for tc in d.tool_calls or []:
                call = calls.setdefault(tc.index, ["", ""])
                call[0] += (tc.function and tc.function.name) or ""
                call[1] += (tc.function and tc.function.arguments) or ""
            ids += (c.model_extra or {}).get("token_ids") or []
            finish = c.finish_reason or finish
    return {"content": content or None, "reasoning": reasoning or None,
            "calls": [tuple(calls[i]) for i in sorted(calls)], "finish": finish, "token_ids": ids}


def check_against_harmony(answer: dict):
    """openai-harmony reads the same reasoning, call or content from the generated tokens."""
    messages = harmony_messages(answer["token_ids"])
    analysis = [m["text"] for m in messages if m["channel"] == "analysis"]
    assert (answer["reasoning"] or None) == ("".join(analysis) or None)
    calls = [(m["recipient"].removeprefix("functions."), m["text"]) for m in messages
             if (m["recipient"] or "").startswith("functions.")]
    assert answer["calls"] == calls
    finals = [m["text"] for m in messages if m["channel"] == "final"]
    assert (answer["content"] or None) == ("".join(finals) or None)


@pytest.mark.parametrize("parallel", [True, False])
def test_required_forces_one_harmony_call_streamed_as_complete(gpt_oss, parallel):
    kw = dict(tools=TOOLS, tool_choice="required", parallel_tool_calls=parallel)
    whole = complete(gpt_oss, **kw)
    assert whole["finish"] == "tool_calls", whole
    assert whole["content"] is None
    [(name, arguments)] = whole["calls"]
    jsonschema.validate(json.loads(arguments), SCHEMAS[name])
    # The call message is the answer's last, ended by `<|call|>`.
    assert whole["token_ids"][-1] == CALL
    assert streamed(gpt_oss, **kw) == whole


def test_a_named_function_is_the_one_called(gpt_oss):
    kw = dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_time"}})
    whole = complete(gpt_oss, **kw)
    [(name, arguments)] = whole["calls"]
    assert name == "get_time"
    jsonschema.validate(json.loads(arguments), TIME_PARAMS)
    assert streamed(gpt_oss, **kw) == whole


def test_the_analysis_before_a_forced_call_is_reasoning(gpt_oss):
    """The random model opens an analysis (greedy, this prompt): it is reasoning_content, and
    bounded, so the call still comes."""
    whole = complete(gpt_oss, tools=TOOLS, tool_choice="required")
    assert whole["reasoning"], "expected the greedy answer to reason first"
    assert whole["token_ids"][:3] == [200005, 35644, 200008]  # <|channel|>analysis<|message|>
    assert len(whole["calls"]) == 1


def test_forced_calls_read_as_openai_harmony_reads_the_tokens(gpt_oss):
    for kw in (dict(tools=TOOLS, tool_choice="required"),
               dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}})):
        check_against_harmony(complete(gpt_oss, **kw))


SCHEMA_FORMAT = {"type": "json_schema",
                 "json_schema": {"name": "forecast", "schema": ANSWER_SCHEMA, "strict": True}}


def test_a_response_format_holds_the_final_message(gpt_oss):
    whole = complete(gpt_oss, response_format=SCHEMA_FORMAT)
    assert whole["finish"] == "stop", whole
    assert whole["calls"] == []
    jsonschema.validate(json.loads(whole["content"]), ANSWER_SCHEMA)
    # The final message is the answer's last, ended by `<|return|>`.
    assert whole["token_ids"][-1] == RETURN
    assert streamed(gpt_oss, response_format=SCHEMA_FORMAT) == whole


def test_json_object_is_an_object_in_the_final_message(gpt_oss):
    """Any object: the random model does not close it within max_tokens, but it is one."""
    fmt = {"type": "json_object"}
    whole = complete(gpt_oss, response_format=fmt)
    assert whole["content"].startswith("{"), whole
    if whole["finish"] == "stop":
        assert isinstance(json.loads(whole["content"]), dict)
    assert streamed(gpt_oss, response_format=fmt) == whole


def test_structured_output_reads_as_openai_harmony_reads_the_tokens(gpt_oss):
    whole = complete(gpt_oss, response_format=SCHEMA_FORMAT)
    assert whole["reasoning"], "expected the greedy answer to reason first"
    check_against_harmony(whole)


def test_with_tools_offered_a_response_format_may_also_be_a_call(gpt_oss):
    whole = complete(gpt_oss, tools=TOOLS, response_format=SCHEMA_FORMAT)
    if whole["calls"]:
        [(name, arguments)] = whole["calls"]
        jsonschema.validate(json.loads(arguments), SCHEMAS[name])
        assert whole["finish"] == "tool_calls"
    else:
        jsonschema.validate(json.loads(whole["content"]), ANSWER_SCHEMA)
    assert streamed(gpt_oss, tools=TOOLS, response_format=SCHEMA_FORMAT) == whole


def test_seeded_samples_stream_as_they_complete(gpt_oss):
    for seed in range(3):
        kw = dict(tools=TOOLS, tool_choice="required", seed=seed)
        r = gpt_oss.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=MAX_TOKENS,
                                            temperature=1.0, **kw)
        [call] = r.choices[0].message.tool_calls
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
        content = r.choices[0].message.content
        stream = gpt_oss.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=MAX_TOKENS,
                                                 temperature=1.0, stream=True, **kw)
        args = "".join(tc.function.arguments or "" for ch in stream for c in ch.choices
                       for tc in c.delta.tool_calls or [])
        assert args == call.function.arguments and content is None


# --- Responses ---------------------------------------------------------------------------------

RESPONSES_TOOLS = [{"type": "function", "name": t["function"]["name"],
                    "description": t["function"].get("description"),
                    "parameters": t["function"]["parameters"], "strict": False} for t in TOOLS]


def items(output) -> list[tuple]:
    out = []
    for item in output:
        if item.type == "reasoning":
            out.append(("reasoning", "".join(c.text for c in item.content or [])))
        elif item.type == "function_call":
            out.append(("function_call", item.name, item.arguments))
        elif item.type == "message":
            out.append(("message", "".join(c.text for c in item.content)))
    return out


def responses(client, **kw):
    r = client.responses.create(model=NAME, input="What is the weather in Paris?",
                                max_output_tokens=MAX_TOKENS, temperature=0, **kw)
    final = None
    for event in client.responses.create(model=NAME, input="What is the weather in Paris?",
                                         max_output_tokens=MAX_TOKENS, temperature=0, stream=True,
                                         **kw):
        if event.type == "response.completed":
            final = event.response
    assert r.status == "completed" and final is not None
    assert items(final.output) == items(r.output)
    return items(r.output)


@pytest.mark.parametrize("choice", ["required", {"type": "function", "name": "get_weather"}])
def test_responses_forced_call_is_a_function_call_item(gpt_oss, choice):
    out = responses(gpt_oss, tools=RESPONSES_TOOLS, tool_choice=choice)
    calls = [i for i in out if i[0] == "function_call"]
    [(_, name, arguments)] = calls
    if isinstance(choice, dict):
        assert name == choice["name"]
    jsonschema.validate(json.loads(arguments), SCHEMAS[name])
    assert not [i for i in out if i[0] == "message"]
    # The same prompt as chat's: the same reasoning and call.
    chat = complete(gpt_oss, tools=TOOLS, tool_choice=choice if choice == "required" else
                    {"type": "function", "function": {"name": choice["name"]}})
    assert [i[1] for i in out if i[0] == "reasoning"] == [chat["reasoning"]] * bool(chat["reasoning"])
    assert chat["calls"] == [(name, arguments)]


def test_responses_text_format_holds_the_final_message(gpt_oss):
    fmt = {"format": {"type": "json_schema", "name": "forecast", "schema": ANSWER_SCHEMA,
                      "strict": True}}
    out = responses(gpt_oss, text=fmt)
    [(_, text)] = [i for i in out if i[0] == "message"]
    jsonschema.validate(json.loads(text), ANSWER_SCHEMA)
