"""EAGLE-3 heads over real HTTP (issue 39): the llama fixture's shape with random weights
(`--load-format dummy` over its config.json) served plain and with each of the two random
heads of fixtures/eagle3 (one per published layout, scripts/make_eagle3_fixture.py): the
official openai client gets the same greedy answers, and the servers count drafts. A random
head's drafts are mostly rejected: this checks exactness and wiring, not speed (the head's
forward itself is checked against PyTorch in crates/cpu/tests/eagle3.rs). A head that does
not fit the model, or a missing --draft-model, is a clear error before serving."""

import subprocess

import httpx
import openai
import pytest

from conftest import ROOT, Server
from test_cli_help import binary

CONFIG = ROOT / "fixtures/arch/llama/config.json"
HEADS = ROOT / "fixtures/eagle3"
PROMPTS = ["The weather in Paris is", "def fibonacci(n):", "List three colours:"]


def serve(tmp, name, *extra) -> Server:
    return Server(["--load-format", "dummy", *extra], tmp, name, model_file=str(CONFIG),
                  model_name="llama")


def answers(server: Server) -> list:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120)
    out = []
    for prompt in PROMPTS:
        r = client.completions.create(model="llama", prompt=prompt, max_tokens=24, temperature=0,
                                      extra_body={"ignore_eos": True, "return_token_ids": True})
        out.append(r.choices[0].token_ids)
    return out


def drafted(server: Server) -> float:
    for line in httpx.get(server.url + "/metrics").text.splitlines():
        if line.startswith("ferrite:spec_decode_num_draft_tokens_total"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize("head", ["llama_eagle", "llama_speculators"])
def test_greedy_answers_are_the_same_with_an_eagle3_head(tmp_path, head):
    plain = serve(tmp_path, "plain")
    eagle = serve(tmp_path, head, "--speculative", "eagle3", "--draft-model", str(HEADS / head),
                  "--speculative-fixed-k")
    try:
        assert answers(eagle) == answers(plain)
        assert drafted(eagle) > 0
        assert "speculative decoding with an EAGLE-3 head" in eagle.log_text()
    finally:
        plain.stop()
        eagle.stop()


def generate(*extra) -> subprocess.CompletedProcess:
    return subprocess.run([binary(), "generate", str(CONFIG), "--load-format", "dummy",
                           "--prompt", "hi", "--max-tokens", "2", "--kv-cache-memory", "64MiB",
                           *extra], capture_output=True, text=True, timeout=120)


def test_a_head_that_does_not_fit_or_is_missing_is_a_clear_error(tmp_path):
    r = generate("--speculative", "eagle3")
    assert r.returncode != 0 and "needs --draft-model" in r.stderr, r.stderr
    # A head for another model: the qwen3 fixture's shape is not the head's target.
    r = subprocess.run([binary(), "generate", str(ROOT / "fixtures/arch/qwen3/config.json"),
                        "--load-format", "dummy", "--prompt", "hi", "--max-tokens", "2",
                        "--kv-cache-memory", "64MiB", "--speculative", "eagle3",
                        "--draft-model", str(HEADS / "llama_eagle")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "EAGLE-3 head" in r.stderr, r.stderr
    assert "panicked" not in r.stderr
    r = generate("--speculative", "eagle3", "--draft-model", str(tmp_path / "absent"))
    assert r.returncode != 0 and "absent" in r.stderr, r.stderr
    r = generate("--speculative", "eagle3", "--draft-model", str(HEADS / "llama_eagle"),
                 "--draft-vocab", "100")
    assert r.returncode != 0 and "--draft-vocab" in r.stderr, r.stderr
