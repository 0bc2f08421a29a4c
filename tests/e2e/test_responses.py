"""The Responses API (POST /v1/responses) through the official client: string and item inputs,
instructions, usage, max_output_tokens, function tools (forced by name, and a function_call_output
round trip) on Qwen2.5-Coder, text.format json_schema, streaming events, the abort of a
disconnected stream, stored responses (retrieve, previous_response_id, delete, background and
cancel), and the 400s for what cannot be done."""

import json
import time

import httpx
import jsonschema
import openai
import pytest

from conftest import API_KEY, MODEL_NAME, QWEN_NAME, Server, metric

WEATHER_PARAMS = {"type": "object", "properties": {"city": {"type": "string", "description": "The city name"}},
                  "required": ["city"]}
WEATHER = [{"type": "function", "name": "get_weather", "description": "Get the current weather in a city",
            "parameters": WEATHER_PARAMS}]
# Worded so that greedy 0.5B Qwen calls the tool (see test_tools.py).
ASK = "What is the weather in Paris right now?"


def messages_of(r):
    return [o for o in r.output if o.type == "message"]


def calls_of(r):
    return [o for o in r.output if o.type == "function_call"]


# --- text ------------------------------------------------------------------------------------

def test_a_string_input_with_instructions_answers_as_chat_does(client):
    r = client.responses.create(model=MODEL_NAME, input="What is the capital of France?",
                                instructions="Answer in one short sentence.", temperature=0,
                                max_output_tokens=30)
    assert r.object == "response" and r.id.startswith("resp_") and r.model == MODEL_NAME
    assert r.output_text.strip()
    [message] = messages_of(r)
    assert message.id.startswith("msg_") and message.role == "assistant"
    assert [p.type for p in message.content] == ["output_text"]
    u = r.usage
    assert u.input_tokens > 0 and 0 < u.output_tokens <= 30
    assert u.total_tokens == u.input_tokens + u.output_tokens
    assert u.output_tokens_details.reasoning_tokens == 0
    assert r.store is True and r.instructions == "Answer in one short sentence."
    # The instructions are the system message of the same conversation on the chat route.
    chat = client.chat.completions.create(model=MODEL_NAME, temperature=0, max_tokens=30, messages=[
        {"role": "system", "content": "Answer in one short sentence."},
        {"role": "user", "content": "What is the capital of France?"}])
    assert chat.choices[0].message.content == r.output_text
    assert chat.usage.prompt_tokens == u.input_tokens
    assert chat.usage.completion_tokens == u.output_tokens
    assert r.status == ("completed" if chat.choices[0].finish_reason == "stop" else "incomplete")


def test_running_out_of_tokens_is_incomplete(client):
    r = client.responses.create(model=MODEL_NAME, input="Tell me a long story.", max_output_tokens=3,
                                temperature=0)
    assert r.status == "incomplete"
    assert r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 3
    assert messages_of(r)[0].status == "incomplete"


def test_item_input_with_parts_and_a_developer_message(client):
    items = [{"role": "developer", "content": "Answer in one short sentence."},
             {"type": "message", "role": "user",
              "content": [{"type": "input_text", "text": "What is the capital "},
                          {"type": "input_text", "text": "of France?"}]}]
    r = client.responses.create(model=MODEL_NAME, input=items, temperature=0, max_output_tokens=30)
    plain = client.responses.create(model=MODEL_NAME, input="What is the capital of France?",
                                    instructions="Answer in one short sentence.", temperature=0,
                                    max_output_tokens=30)
    assert r.output_text == plain.output_text
    assert r.usage.input_tokens == plain.usage.input_tokens


def test_text_format_json_schema_is_obeyed(qwen):
    schema = {"type": "object", "additionalProperties": False, "required": ["name", "country", "population_millions"],
              "properties": {"name": {"type": "string", "maxLength": 30},
                             "country": {"type": "string", "maxLength": 30},
                             "population_millions": {"type": "integer", "minimum": 0, "maximum": 100}}}
    r = qwen.responses.create(model=QWEN_NAME, input="Describe Paris as JSON.", temperature=0,
                              max_output_tokens=120,
                              text={"format": {"type": "json_schema", "name": "city", "schema": schema,
                                               "strict": True}})
    assert r.status == "completed", r.output_text
    jsonschema.validate(json.loads(r.output_text), schema)
    assert r.text.format.type == "json_schema"


def test_text_format_json_object_gives_an_object(client):
    r = client.responses.create(model=MODEL_NAME, input="List three colors as a JSON object.",
                                text={"format": {"type": "json_object"}}, temperature=0, max_output_tokens=200)
    assert r.status == "completed", r.output_text
    assert isinstance(json.loads(r.output_text), dict)


# --- function tools on Qwen2.5-Coder ---------------------------------------------------------

def test_a_named_tool_choice_forces_a_call_that_matches_the_schema(qwen):
    # Asked for a joke, greedy Qwen answers in text; the named tool_choice makes it call anyway.
    kw = dict(model=QWEN_NAME, input="Tell me a joke.", tools=WEATHER, temperature=0, max_output_tokens=80)
    free = qwen.responses.create(**kw)
    assert calls_of(free) == [] and free.output_text
    forced = qwen.responses.create(tool_choice={"type": "function", "name": "get_weather"}, **kw)
    [call] = calls_of(forced)
    assert call.name == "get_weather" and call.id.startswith("fc_") and call.call_id.startswith("call_")
    assert call.status == "completed"
    jsonschema.validate(json.loads(call.arguments), WEATHER_PARAMS)
    assert forced.tool_choice.type == "function" and forced.tool_choice.name == "get_weather"
    assert [t.name for t in forced.tools] == ["get_weather"]


def test_a_function_call_output_round_trip(qwen):
    first = qwen.responses.create(model=QWEN_NAME, input=[{"role": "user", "content": ASK}], tools=WEATHER,
                                  temperature=0, max_output_tokens=60)
    [call] = calls_of(first)
    assert json.loads(call.arguments) == {"city": "Paris"}
    # What came out goes back in as it came, followed by the call's result.
    history = [{"role": "user", "content": ASK}, *[o.model_dump(exclude_none=True) for o in first.output],
               {"type": "function_call_output", "call_id": call.call_id, "output": "22C and sunny"}]
    second = qwen.responses.create(model=QWEN_NAME, input=history, tools=WEATHER, temperature=0,
                                   max_output_tokens=60)
    # The same conversation on the chat route renders to the same prompt (the call and its
    # result in the template's own format) and so gets the same answer. (What 0.5B Qwen answers
    # to a tool result is not worth asserting: greedy, it repeats the call as text.)
    chat = qwen.chat.completions.create(model=QWEN_NAME, temperature=0, max_tokens=60, messages=[
        {"role": "user", "content": ASK},
        {"role": "assistant", "content": None, "tool_calls": [{"id": call.call_id, "type": "function",
         "function": {"name": "get_weather", "arguments": call.arguments}}]},
        {"role": "tool", "tool_call_id": call.call_id, "content": "22C and sunny"}],
        tools=[{"type": "function", "function": {k: v for k, v in WEATHER[0].items() if k != "type"}}])
    assert chat.usage.prompt_tokens == second.usage.input_tokens
    assert chat.usage.prompt_tokens > first.usage.input_tokens + 10
    assert chat.choices[0].message.content == second.output_text
    assert [(c.function.name, c.function.arguments) for c in chat.choices[0].message.tool_calls or []] == \
        [(c.name, c.arguments) for c in calls_of(second)]


# --- streaming -------------------------------------------------------------------------------

def check_stream(events):
    """Sequence numbers from 0, lifecycle order, and every item's events in order."""
    assert [e.sequence_number for e in events] == list(range(len(events)))
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] in ("response.completed", "response.incomplete")
    assert events[0].response.status == "in_progress" and events[0].response.output == []
    final = events[-1].response
    done = [e for e in events if e.type == "response.output_item.done"]
    assert [e.output_index for e in done] == list(range(len(final.output)))
    assert [e.item.id for e in done] == [o.id for o in final.output]
    return final


def test_a_stream_adds_up_to_the_complete_response(client):
    kw = dict(model=MODEL_NAME, input="Write a haiku about the sea.", temperature=0, max_output_tokens=40)
    whole = client.responses.create(**kw)
    events = list(client.responses.create(stream=True, **kw))
    final = check_stream(events)
    types = [e.type for e in events]
    assert types[2:4] == ["response.output_item.added", "response.content_part.added"]
    assert types[-4:-1] == ["response.output_text.done", "response.content_part.done", "response.output_item.done"]
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 1
    item_id = final.output[0].id
    assert all(e.item_id == item_id and e.output_index == 0 and e.content_index == 0 for e in deltas)
    joined = "".join(e.delta for e in deltas)
    [text_done] = [e for e in events if e.type == "response.output_text.done"]
    assert joined == text_done.text == final.output_text == whole.output_text
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert final.status == whole.status


def test_a_streamed_call_comes_as_argument_events(qwen):
    kw = dict(model=QWEN_NAME, input=ASK, tools=WEATHER, temperature=0, max_output_tokens=60)
    events = list(qwen.responses.create(stream=True, **kw))
    final = check_stream(events)
    [call] = calls_of(final)
    added = [e for e in events if e.type == "response.output_item.added" and e.item.type == "function_call"]
    assert added[0].item.arguments == "" and added[0].item.status == "in_progress"
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    [args_done] = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert args == args_done.arguments == call.arguments
    assert json.loads(call.arguments) == {"city": "Paris"}
    whole = qwen.responses.create(**kw)
    assert [(c.name, c.arguments) for c in calls_of(whole)] == [(call.name, call.arguments)]


def test_sse_event_lines_name_each_event(server):
    body = {"model": MODEL_NAME, "input": "hi", "max_output_tokens": 5, "stream": True}
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=60) as c:
        with c.stream("POST", "/v1/responses", json=body) as r:
            assert r.status_code == 200
            lines = [line for line in r.iter_lines() if line]
    names = [line.removeprefix("event: ") for line in lines if line.startswith("event: ")]
    data = [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: ")]
    assert names == [d["type"] for d in data] and names[-1] == "response.incomplete"
    assert "[DONE]" not in "".join(lines)


def test_a_client_that_disconnects_mid_stream_is_aborted(server, http):
    body = {"model": MODEL_NAME, "input": "Tell me a long story.", "max_output_tokens": 1000, "stream": True,
            "temperature": 0}
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=60) as c:
        with c.stream("POST", "/v1/responses", json=body) as r:
            deltas = 0
            for line in r.iter_lines():
                deltas += line == "event: response.output_text.delta"
                if deltas >= 4:
                    break
            assert metric(http, "ferrite:num_requests_running") >= 1
    deadline = time.time() + 1.0
    while time.time() < deadline and metric(http, "ferrite:num_requests_running") != 0:
        time.sleep(0.05)
    assert metric(http, "ferrite:num_requests_running") == 0
    assert server.alive()


# --- reasoning ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def r1_client(tmp_path_factory):
    """SmolLM2 read as DeepSeek-R1 output: no </think> ever comes, so everything is reasoning."""
    s = Server(["--reasoning-parser", "deepseek_r1"], tmp_path_factory.mktemp("r1"), "r1-responses")
    yield openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=120)
    s.stop()


def test_reasoning_is_a_reasoning_item_streamed_and_not(r1_client):
    kw = dict(model=MODEL_NAME, input=ASK, temperature=0, max_output_tokens=12)
    r = r1_client.responses.create(**kw)
    [item] = r.output
    assert item.type == "reasoning" and item.id.startswith("rs_") and item.status == "incomplete"
    assert item.summary == [] and [c.type for c in item.content] == ["reasoning_text"]
    assert item.content[0].text.strip() and r.output_text == ""
    # Every generated token came before any answer: all of them are reasoning.
    assert r.usage.output_tokens_details.reasoning_tokens == r.usage.output_tokens == 12
    chat = r1_client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": ASK}],
                                             temperature=0, max_tokens=12)
    assert chat.choices[0].message.model_extra["reasoning_content"] == item.content[0].text
    events = list(r1_client.responses.create(stream=True, **kw))
    final = check_stream(events)
    joined = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert joined == final.output[0].content[0].text == item.content[0].text


# --- what cannot be done ----------------------------------------------------------------------

@pytest.mark.parametrize("kw,param", [
    (dict(background=True, store=False), "background"),
    (dict(background=True, stream=True), "background"),
    # SmolLM2's template reads no reasoning_effort (a harmony template does).
    (dict(reasoning={"effort": "high"}), "reasoning.effort"),
    (dict(extra_body={"temprature": 0.5}), "temprature"),
    (dict(tools=[{"type": "web_search"}]), "tools"),
    (dict(input=[{"type": "item_reference", "id": "msg_1"}]), "input"),
    (dict(include=["reasoning.encrypted_content"]), "include"),
    (dict(include=["message.output_text.logprobs"]), "include"),
    (dict(truncation="auto"), "truncation"),
])
def test_what_cannot_be_done_is_a_400_naming_the_field(client, kw, param):
    kw = {"input": "hi"} | kw
    with pytest.raises(openai.BadRequestError, match=param) as e:
        client.responses.create(model=MODEL_NAME, max_output_tokens=2, **kw)
    assert e.value.param == param


def test_truncation_disabled_and_an_empty_include_are_what_ferrite_does(client):
    r = client.responses.create(model=MODEL_NAME, input="hi", max_output_tokens=2, truncation="disabled",
                                include=[])
    assert r.truncation == "disabled"
    # disabled: an input over the context is refused, never cut.
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model=MODEL_NAME, input="hi " * 3000, max_output_tokens=2, truncation="disabled")
    assert "context length" in str(e.value)


def test_bookkeeping_fields_are_accepted(client):
    r = client.responses.create(model=MODEL_NAME, input="hi", max_output_tokens=2, store=False,
                                metadata={"k": "v"}, user="u-1", safety_identifier="s", prompt_cache_key="p")
    assert r.status == "incomplete" and r.store is False
    # Not stored: nothing to fetch or continue.
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError) as e:
        client.responses.create(model=MODEL_NAME, input="more", previous_response_id=r.id)
    assert e.value.body["param"] == "previous_response_id"


# --- stored responses ------------------------------------------------------------------------

def test_a_stored_response_is_fetched_continued_and_deleted(qwen):
    story = " ".join(f"On day {i} the traveller walked to the next town, bought bread, and "
                     f"wrote a letter home about the weather." for i in range(1, 9))
    ask = dict(model=QWEN_NAME, temperature=0, instructions="Answer briefly.")
    first = qwen.responses.create(input=story + " Where did the traveller go each day?",
                                  max_output_tokens=24, **ask)
    assert first.store is True
    again = qwen.responses.retrieve(first.id)
    assert again.output_text == first.output_text and again.status == first.status
    # Instructions are the request's own (OpenAI's rule): the second turn sends them again.
    second = qwen.responses.create(input="And what did they buy?", previous_response_id=first.id,
                                   max_output_tokens=16, **ask)
    # The continuation is the whole conversation, sent statelessly.
    stateless = qwen.responses.create(
        max_output_tokens=16, store=False,
        input=[{"role": "user", "content": story + " Where did the traveller go each day?"},
               *[o.model_dump(exclude_none=True) for o in first.output],
               {"role": "user", "content": "And what did they buy?"}], **ask)
    assert second.output_text == stateless.output_text
    assert second.usage.input_tokens == stateless.usage.input_tokens
    # The earlier turn's prompt and answer come from the prefix cache (whole pages of 16).
    earlier = first.usage.input_tokens + first.usage.output_tokens
    assert second.usage.input_tokens_details.cached_tokens >= 0.9 * earlier, (second.usage, earlier)
    deleted = qwen.responses.delete(first.id)
    assert deleted is None or getattr(deleted, "deleted", True)
    with pytest.raises(openai.NotFoundError):
        qwen.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError):
        qwen.responses.create(input="more", previous_response_id=first.id, **ask)


def test_a_background_response_is_polled_and_can_be_cancelled(client):
    started = client.responses.create(model=MODEL_NAME, input="Tell a long story.", background=True,
                                      max_output_tokens=48, temperature=0)
    assert started.status == "in_progress" and started.background is True
    for _ in range(200):
        polled = client.responses.retrieve(started.id)
        if polled.status != "in_progress":
            break
        time.sleep(0.05)
    assert polled.status in ("completed", "incomplete") and polled.output_text
    sync = client.responses.create(model=MODEL_NAME, input="Tell a long story.",
                                   max_output_tokens=48, temperature=0, store=False)
    assert polled.output_text == sync.output_text
    with pytest.raises(openai.BadRequestError):
        client.responses.cancel(started.id)
    long = client.responses.create(model=MODEL_NAME, input="Count to a thousand.", background=True,
                                   max_output_tokens=1500, temperature=0)
    cancelled = client.responses.cancel(long.id)
    assert cancelled.status == "cancelled"
    time.sleep(0.3)
    assert client.responses.retrieve(long.id).status == "cancelled"


def test_a_stored_response_survives_a_thousand_others_within_the_bound(server):
    # The default bound is 4,096 responses and 256 MiB: a thousand short ones later, the first is
    # still there, whole.
    from concurrent.futures import ThreadPoolExecutor
    headers = {"Authorization": f"Bearer {API_KEY}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=120) as h:
        first = h.post("/v1/responses", json={"model": MODEL_NAME, "input": "Name a colour.",
                                              "max_output_tokens": 8, "temperature": 0}).json()

        def other(i):
            r = h.post("/v1/responses", json={"model": MODEL_NAME, "input": f"Say {i}.",
                                              "max_output_tokens": 1})
            return r.status_code

        with ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(other, range(1000)))
        assert codes == [200] * 1000
        again = h.get(f"/v1/responses/{first['id']}")
        assert again.status_code == 200, again.text
        assert again.json()["output"] == first["output"]
