"""Structured outputs through the official client: response_format (pydantic models via
`parse`, json_object, json_schema), vLLM's structured_outputs (regex, choice) and guided_*
names, streaming, n > 1, completions, the 400 for a schema keyword the engine cannot enforce,
and a property test over random JSON schemas validated with `jsonschema`."""

import json
import random
import re
import time
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import openai
import pytest
from pydantic import BaseModel, Field

from conftest import MODEL_NAME, QWEN_NAME

CHAT = "/v1/chat/completions"


class City(BaseModel):
    name: str = Field(max_length=30)
    country: str = Field(max_length=30)
    population_millions: int = Field(ge=0, le=100)


def ask(text):
    return [{"role": "user", "content": text}]


def test_parse_gives_a_pydantic_object(qwen):
    completion = qwen.chat.completions.parse(
        model=QWEN_NAME, messages=ask("Describe Paris as JSON: name, country, population in millions."),
        response_format=City, max_tokens=120, temperature=0)
    choice = completion.choices[0]
    assert choice.finish_reason == "stop"
    city = choice.message.parsed
    assert isinstance(city, City)
    assert 0 <= city.population_millions <= 100


def test_parse_on_smollm2(client):
    completion = client.chat.completions.parse(
        model=MODEL_NAME, messages=ask("Give me a city as JSON."), response_format=City,
        max_tokens=150, temperature=0)
    assert isinstance(completion.choices[0].message.parsed, City)


def test_json_object_gives_valid_json(client):
    r = client.chat.completions.create(
        model=MODEL_NAME, messages=ask("List three colors as a JSON object."),
        response_format={"type": "json_object"}, max_tokens=200, temperature=0)
    choice = r.choices[0]
    assert choice.finish_reason == "stop", choice.message.content
    assert isinstance(json.loads(choice.message.content), dict)


@pytest.mark.parametrize("field", ["structured_outputs", "guided_regex"])
def test_a_regex_constrains_the_output(client, field):
    rx = r"\d{3}-\d{4}"
    body = {"structured_outputs": {"regex": rx}} if field == "structured_outputs" else {"guided_regex": rx}
    r = client.chat.completions.create(
        model=MODEL_NAME, messages=ask("Give me a phone number."), max_tokens=20, temperature=0.8,
        seed=3, extra_body=body)
    assert re.fullmatch(rx, r.choices[0].message.content), r.choices[0].message.content
    assert r.choices[0].finish_reason == "stop"


def test_the_guided_decoding_backend_is_llguidance(client):
    rx = r"[0-9]{3}-[0-9]{4}"
    r = client.chat.completions.create(
        model=MODEL_NAME, messages=ask("Give me a phone number."), max_tokens=20, temperature=0,
        extra_body={"guided_regex": rx, "guided_decoding_backend": "guidance"})
    assert re.fullmatch(rx, r.choices[0].message.content), r.choices[0].message.content
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model=MODEL_NAME, messages=ask("Give me a phone number."), max_tokens=20,
            extra_body={"guided_regex": rx, "guided_decoding_backend": "xgrammar"})
    assert e.value.body["param"] == "guided_decoding_backend"
    assert "llguidance" in e.value.body["message"]


@pytest.mark.parametrize("field", ["structured_outputs", "guided_choice"])
def test_a_choice_constrains_the_output(client, field):
    choices = ["positive", "negative", "neutral"]
    body = {"structured_outputs": {"choice": choices}} if field == "structured_outputs" else {"guided_choice": choices}
    r = client.chat.completions.create(
        model=MODEL_NAME, messages=ask("Sentiment of 'I love it'?"), max_tokens=10, n=3,
        temperature=1.0, seed=1, extra_body=body)
    for c in r.choices:
        assert c.message.content in choices


SCHEMA = {"type": "object", "properties": {
    "title": {"type": "string", "maxLength": 20},
    "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
    "score": {"type": "number", "minimum": 0, "maximum": 10}},
    "required": ["title", "tags", "score"], "additionalProperties": False}
SCHEMA_FORMAT = {"type": "json_schema", "json_schema": {"name": "doc", "schema": SCHEMA, "strict": True}}


def test_streaming_and_n_2_follow_the_schema(client):
    stream = client.chat.completions.create(
        model=MODEL_NAME, messages=ask("Describe a book."), response_format=SCHEMA_FORMAT,
        max_tokens=150, n=2, temperature=0.9, seed=5, stream=True)
    texts, finishes = {}, {}
    for chunk in stream:
        for c in chunk.choices:
            texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
            if c.finish_reason:
                finishes[c.index] = c.finish_reason
    assert sorted(texts) == [0, 1]
    for i, text in texts.items():
        assert finishes[i] == "stop", text
        jsonschema.validate(json.loads(text), SCHEMA)


def test_completions_take_a_json_schema_too(client):
    r = client.completions.create(
        model=MODEL_NAME, prompt="A book, as JSON:", max_tokens=150, temperature=0,
        extra_body={"response_format": SCHEMA_FORMAT})
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].text), SCHEMA)


def test_an_unsupported_schema_keyword_is_a_400_naming_it(http):
    schema = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    r = http.post(CHAT, json={"messages": ask("hi"), "max_tokens": 5, "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": schema}}})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "response_format" and "uniqueItems" in err["message"]


# --- property: random schemas, every complete answer validates --------------------------------

def random_schema(rng: random.Random, depth: int = 0) -> dict:
    kinds = ["string", "integer", "number", "enum", "pattern", "boolean"]
    if depth < 2:
        kinds += ["object", "array", "anyOf"]
    kind = rng.choice(kinds)
    if kind == "string":
        return {"type": "string", "minLength": rng.randint(0, 2), "maxLength": rng.randint(3, 10)}
    if kind == "integer":
        lo = rng.randint(-50, 50)
        return {"type": "integer", "minimum": lo, "maximum": lo + rng.randint(0, 100)}
    if kind == "number":
        # Quarters (exact in binary, so the validator agrees): with unbounded digits a small model
        # writes 150 of them and runs out of tokens before the answer is complete.
        lo = rng.uniform(-10, 10)
        return {"type": "number", "minimum": round(lo, 2), "maximum": round(lo + rng.uniform(0.5, 20), 2),
                "multipleOf": 0.25}
    if kind == "enum":
        return {"enum": rng.sample(["red", "green", "blue", 1, 2.5, None, True], rng.randint(1, 4))}
    if kind == "pattern":
        return {"type": "string", "pattern": rng.choice(["^[a-z]{2,6}$", "^[A-Z][0-9]{2}$", "^(yes|no)$"])}
    if kind == "boolean":
        return {"type": "boolean"}
    if kind == "array":
        lo = rng.randint(0, 2)
        return {"type": "array", "items": random_schema(rng, depth + 1), "minItems": lo,
                "maxItems": lo + rng.randint(0, 2)}
    if kind == "anyOf":
        return {"anyOf": [random_schema(rng, depth + 1) for _ in range(rng.randint(2, 3))]}
    names = rng.sample(["id", "name", "kind", "size", "items", "meta", "ok", "when"], rng.randint(1, 4))
    props = {n: random_schema(rng, depth + 1) for n in names}
    return {"type": "object", "properties": props,
            "required": rng.sample(names, rng.randint(0, len(names))), "additionalProperties": False}


def test_random_schemas_all_validate(client):
    rng = random.Random(1234)
    schemas = [random_schema(rng) for _ in range(200)]

    def run(i):
        schema = schemas[i]
        r = client.chat.completions.create(
            model=MODEL_NAME, messages=ask("Answer with JSON."), max_tokens=160,
            temperature=0.7, seed=i, response_format={"type": "json_schema", "json_schema": {
                "name": f"s{i}", "schema": schema}})
        return schema, r.choices[0]

    started = time.time()
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(run, range(len(schemas))))
    elapsed = time.time() - started
    cut = 0
    for schema, choice in results:
        if choice.finish_reason == "length":
            cut += 1
            continue
        assert choice.finish_reason == "stop"
        try:
            jsonschema.validate(json.loads(choice.message.content), schema)
        except Exception as e:  # noqa: BLE001 - the report names schema and answer
            pytest.fail(f"{schema}\n{choice.message.content!r}\n{e}")
    assert cut <= len(schemas) // 10, f"{cut} answers ran out of tokens"
    assert elapsed < 60, f"took {elapsed:.1f}s"
