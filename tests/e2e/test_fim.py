"""Fill in the middle: `suffix` on /v1/completions with Qwen2.5-Coder-0.5B (its <|fim_prefix|>,
<|fim_suffix|>, <|fim_middle|> tokens). The oracle is transformers' greedy continuation of the
same FIM prompt on the same GGUF (fixtures/reference/qwen2.5-coder-0.5b-fim.json, made by
scripts/make_fim_fixture.py): the prompt's token ids, and the tokens up to the first near-tie.
A model without FIM tokens (SmolLM2 has none) answers 400, as do `suffix` with `echo`."""

import json

import openai
import pytest

from conftest import MODEL_NAME, QWEN_NAME, ROOT

FIXTURE = json.loads((ROOT / "fixtures/reference/qwen2.5-coder-0.5b-fim.json").read_text())
CASES = FIXTURE["cases"]
# Steps compared: up to the first whose top-2 logits are this close (Q4_K_M rounding).
LOW_MARGIN = 0.05


def safe_steps(case):
    return next((i for i, m in enumerate(case["margins"]) if m < LOW_MARGIN), len(case["margins"]))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_suffix_fills_the_middle_as_transformers_does(qwen, case):
    n = len(case["greedy_ids"])
    r = qwen.completions.create(
        model=QWEN_NAME, prompt=case["prefix"], suffix=case["suffix"], max_tokens=n, temperature=0,
        extra_body={"ignore_eos": True, "return_token_ids": True},
    )
    c = r.choices[0]
    assert c.model_extra["prompt_token_ids"] == case["prompt_ids"]
    k = safe_steps(case)
    assert k >= 8, f"{case['name']}: only {k} safe steps"
    assert c.token_ids[:k] == case["greedy_ids"][:k]
    assert r.usage.prompt_tokens == len(case["prompt_ids"])
    # Streamed: the same text.
    stream = qwen.completions.create(
        model=QWEN_NAME, prompt=case["prefix"], suffix=case["suffix"], max_tokens=n, temperature=0,
        stream=True, extra_body={"ignore_eos": True},
    )
    assert "".join(ch.choices[0].text for ch in stream if ch.choices) == c.text


def test_suffix_is_refused_where_it_cannot_work(client, qwen):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL_NAME, prompt="def f(", suffix=")\n", max_tokens=4)
    assert "fill-in-the-middle" in str(e.value) and e.value.body["param"] == "suffix"
    with pytest.raises(openai.BadRequestError) as e:
        qwen.completions.create(model=QWEN_NAME, prompt="def f(", suffix=")\n", max_tokens=4, echo=True)
    assert "echo" in str(e.value)
