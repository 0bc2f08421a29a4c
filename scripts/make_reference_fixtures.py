#!/usr/bin/env python3
"""Make ferrite's reference fixtures with Hugging Face transformers as the oracle.

transformers loads each GGUF dequantized to float32 and we record, per prompt:
the prompt token ids (chat template or plain tokenizer), 32 greedy tokens (EOS ignored, so every
case has 32), the top-1/top-2 logit margin and the top-5 logprobs at each step. Also
tokenization-only cases and rendered chat templates.

Usage: /work/refenv/bin/python scripts/make_reference_fixtures.py [smollm2] [qwen2.5-coder-0.5b] [gemma3-270m]
Needs: pip install torch transformers gguf accelerate; models from scripts/fetch_models.sh.
"""
import json
import os
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "qwen2.5-coder-0.5b": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "gemma3-270m": "gemma-3-270m-q4_k_m.gguf",
}
NEW_TOKENS = 32
TOP = 5

CHAT_CASES = [
    ("capital", [{"role": "user", "content": "What is the capital of France?"}]),
    ("prime", [{"role": "user", "content": "Write a Python function that checks whether a number is prime."}]),
    ("french", [{"role": "user", "content": "Explique en une phrase ce qu'est la photosynthèse."}]),
    ("japanese", [{"role": "user", "content": "日本の首都はどこですか？"}]),
    ("multiturn", [
        {"role": "system", "content": "You are a terse assistant. Answer in one line."},
        {"role": "user", "content": "Name a prime number larger than 10."},
        {"role": "assistant", "content": "11"},
        {"role": "user", "content": "And one larger than 100?"},
    ]),
]
TEXT_CASES = [
    ("fox", "The quick brown fox jumps over the lazy dog. Once upon a time"),
    ("fibonacci", 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'),
    ("courses", "Liste des courses : œufs, crème fraîche, café — et 12,5 € de pain. Ensuite"),
    ("numbers", "1, 2, 3, 5, 8, 13, 21,"),
    ("rust", "fn main() {\n    let v: Vec<u32> = (1..=10).collect();\n    println!(\"{:?}\", v);\n}\n\n// This program"),
]
TOKENIZE_TEXTS = [
    "Hello, world!",
    "  leading spaces and\ttabs\n\nnewlines   ",
    "Numbers: 3.14159, 1234567890, 42nd, 1e-5",
    "Unicode: naïve café, Straße, Ελληνικά, русский, 中文字符, 日本語, 한국어, emoji 🦀🚀👍🏽",
    "def f(x):\n    return x**2  # square\n",
    "<|im_start|>user\nhi<|im_end|>\n<|endoftext|>",
    "Mixed\r\nline endings\rand\u00a0nbsp",
    "",
]


def chat_ids(tok, messages):
    out = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if hasattr(out, "keys") and "input_ids" in out:
        out = out["input_ids"]
    return [int(t) for t in out]


@torch.no_grad()
def greedy(model, prompt_ids):
    ids = torch.tensor([prompt_ids])
    out = model(ids, use_cache=True)
    past = out.past_key_values
    logits = out.logits[0, -1].float()
    gen, margins, tops = [], [], []
    for _ in range(NEW_TOKENS):
        top2 = torch.topk(logits, 2)
        margins.append(float(top2.values[0] - top2.values[1]))
        lp = torch.log_softmax(logits.double(), -1)
        t5 = torch.topk(lp, TOP)
        tops.append([[int(i), float(v)] for v, i in zip(t5.values, t5.indices)])
        nxt = int(top2.indices[0])
        gen.append(nxt)
        out = model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
        past = out.past_key_values
        logits = out.logits[0, -1].float()
    return gen, margins, tops


def make(key, models_dir, out_dir):
    name = MODELS[key]
    tok = AutoTokenizer.from_pretrained(models_dir, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(models_dir, gguf_file=name, torch_dtype=torch.float32)
    model.eval()
    fx = {"model_file": name, "transformers": __import__("transformers").__version__,
          "tokenize": [], "chat": [], "generate": []}
    for text in TOKENIZE_TEXTS:
        for special in (False, True):
            fx["tokenize"].append({"text": text, "add_special_tokens": special,
                                   "ids": tok(text, add_special_tokens=special)["input_ids"]})
    # A base model's file (Gemma 3 270M) carries no chat template: text cases only.
    chat_cases = CHAT_CASES if tok.chat_template else []
    for case, messages in chat_cases:
        rendered = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        ids = chat_ids(tok, messages)
        fx["chat"].append({"name": case, "messages": messages, "add_generation_prompt": True,
                           "rendered": rendered, "ids": ids})
    cases = [(c, chat_ids(tok, m), "chat") for c, m in chat_cases]
    cases += [(c, tok(t)["input_ids"], "text") for c, t in TEXT_CASES]
    for case, ids, kind in cases:
        gen, margins, tops = greedy(model, ids)
        fx["generate"].append({"name": case, "kind": kind, "prompt_ids": ids, "greedy_ids": gen,
                               "margins": margins, "top_logprobs": tops,
                               "text": tok.decode(gen)})
        print(f"{key} {case}: {len(ids)} prompt tokens -> {tok.decode(gen)!r}", flush=True)
    path = out_dir / f"{key}.json"
    path.write_text(json.dumps(fx, ensure_ascii=False, indent=1) + "\n")
    print("wrote", path)


def main():
    torch.set_num_threads(int(os.environ.get("FIXTURE_THREADS", "1")))
    models_dir = os.environ.get("FERRITE_MODELS", str(Path.home() / ".cache/ferrite/models"))
    out_dir = Path(__file__).resolve().parent.parent / "fixtures" / "reference"
    out_dir.mkdir(parents=True, exist_ok=True)
    for key in sys.argv[1:] or list(MODELS):
        make(key, models_dir, out_dir)


if __name__ == "__main__":
    main()
