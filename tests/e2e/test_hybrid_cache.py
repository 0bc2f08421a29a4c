"""Prefix caching on a linear-attention hybrid (issue 37): a 10-turn agent conversation on a
Qwen3.5-shaped model with random weights (`--load-format dummy` over a config.json), each
turn's prompt the last prompt + its answer + a new user message, as token ids. Against the
same server without prefix caching: identical answers every turn; from turn 2 on the cache
covers at least 90% of the previous turn's prompt + output (state snapshots every 16
tokens); the last turn's time to first token is at most 0.2x the uncached one. Two more
servers decode speculatively, with suffix decoding and with the model's own MTP layer (random
too: its drafts are mostly rejected), the rejected drafts taken back out of the recurrent
state: the same answers, and the same cache hits."""

import copy
import json
import time
from pathlib import Path

import httpx
import pytest

from conftest import ROOT, Server

TURNS = 10
NEW_TOKENS = 32
# transformers' Qwen3.5 layout at a size where prefill dominates a request's time on the CPU.
SHAPE = {
    "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 8,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
    "linear_num_key_heads": 4, "linear_num_value_heads": 8, "linear_key_head_dim": 64,
    "linear_value_head_dim": 64, "vocab_size": 512,
    "layer_types": ["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 3
    + ["full_attention"],
}


@pytest.fixture(scope="module")
def config_path(tmp_path_factory) -> Path:
    config = json.loads((ROOT / "fixtures/arch/qwen3_5/config.json").read_text())
    config = copy.deepcopy(config)
    config["text_config"].update(SHAPE)
    path = tmp_path_factory.mktemp("hybrid") / "config.json"
    path.write_text(json.dumps(config))
    return path


def serve(config_path: Path, tmp: Path, name: str, *extra) -> Server:
    return Server(["--load-format", "dummy", "--state-snapshot-interval", "16", *extra], tmp,
                  name, model_file=str(config_path), model_name="hybrid")


def complete(url: str, prompt, max_tokens=NEW_TOKENS) -> dict:
    r = httpx.post(url + "/v1/completions", timeout=300, json={
        "model": "hybrid", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
        "return_token_ids": True, "ignore_eos": True})
    r.raise_for_status()
    return r.json()


def user_message(url: str, turn: int) -> list[int]:
    text = f"\nUser turn {turn}: call get_weather for city number {turn * 7} and " \
           f"summarise the result in one line, then list {turn} follow-up checks.\n"
    return httpx.post(url + "/tokenize", json={"prompt": text}).json()["tokens"]


def test_agent_turns_reuse_the_cache_and_answer_the_same(config_path, tmp_path):
    cached = serve(config_path, tmp_path, "cached")
    plain = serve(config_path, tmp_path, "plain", "--no-prefix-caching")
    speculative = serve(config_path, tmp_path, "speculative", "--speculative", "suffix",
                        "--speculative-fixed-k", "--num-speculative-tokens", "4")
    mtp = serve(config_path, tmp_path, "mtp", "--speculative", "mtp", "--speculative-fixed-k")
    try:
        system = "System: you are an agent. Tools: get_weather(city), search(query), " \
                 "run(cmd). Answer with tool calls when a tool helps.\n" * 2
        prompt = httpx.post(cached.url + "/tokenize", json={"prompt": system}).json()["tokens"]
        previous_total = None
        for turn in range(1, TURNS + 1):
            prompt = prompt + user_message(cached.url, turn)
            a, b = complete(cached.url, prompt), complete(plain.url, prompt)
            ids_a, ids_b = a["choices"][0]["token_ids"], b["choices"][0]["token_ids"]
            assert ids_a == ids_b, f"turn {turn}: cached and uncached answers differ"
            hit = a["usage"]["prompt_tokens_details"]["cached_tokens"]
            for server in (speculative, mtp):
                s = complete(server.url, prompt)
                assert s["choices"][0]["token_ids"] == ids_b, \
                    f"turn {turn}: speculation changed the answer ({server.name})"
                assert s["usage"]["prompt_tokens_details"]["cached_tokens"] == hit
            assert b["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
            if previous_total is not None:
                assert hit >= 0.9 * previous_total, \
                    f"turn {turn}: {hit} cached of the previous {previous_total}"
            print(f"turn {turn}: prompt {len(prompt)} cached {hit}")
            previous_total = len(prompt) + len(ids_a)
            prompt = prompt + ids_a
        # The next turn's first token, with and without the cache.
        prompt = prompt + user_message(cached.url, TURNS + 1)
        timings = {}
        for name, server in (("cached", cached), ("plain", plain)):
            started = time.perf_counter()
            complete(server.url, prompt, max_tokens=1)
            timings[name] = time.perf_counter() - started
        print(f"time to first token at {len(prompt)} tokens: {timings}")
        assert timings["cached"] <= 0.2 * timings["plain"], timings
        for server in (speculative, mtp):
            metrics = httpx.get(server.url + "/metrics").text
            drafted = [line for line in metrics.splitlines()
                       if line.startswith("ferrite:spec_decode_num_draft_tokens_total")]
            assert drafted and float(drafted[0].rsplit(" ", 1)[1]) > 0, (server.name, drafted)
    finally:
        for server in (cached, plain, speculative, mtp):
            server.stop()
