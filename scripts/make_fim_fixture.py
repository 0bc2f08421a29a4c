#!/usr/bin/env python3
"""Fill-in-the-middle reference for Qwen2.5-Coder-0.5B (the GGUF the e2e tests serve), with
Hugging Face transformers as the oracle (the GGUF dequantized to float32).

Each case is a (prefix, suffix) pair written in the model's FIM format,
`<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>`, tokenized by the model's own
tokenizer; we record the prompt ids and 32 greedy tokens with their top-1/top-2 margins (the
test compares the steps before the first near-tie). Writes
fixtures/reference/qwen2.5-coder-0.5b-fim.json.

Usage: python scripts/make_fim_fixture.py (models from scripts/fetch_models.sh, or FERRITE_MODELS)
"""
import json
import os
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from make_reference_fixtures import MODELS, greedy

CASES = [
    ("fibonacci", "def fibonacci(n):\n    ", "\n    return a\n"),
    (
        "load",
        "import json\n\ndef load(path):\n    with open(path) as f:\n        ",
        "\n\nprint(load('config.json'))\n",
    ),
    (
        "stack",
        "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n",
        "\n    def pop(self):\n        return self.items.pop()\n",
    ),
]


def main():
    torch.set_num_threads(int(os.environ.get("FIXTURE_THREADS", "1")))
    models_dir = os.environ.get("FERRITE_MODELS", str(Path.home() / ".cache/ferrite/models"))
    name = MODELS["qwen2.5-coder-0.5b"]
    tok = AutoTokenizer.from_pretrained(models_dir, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(models_dir, gguf_file=name, torch_dtype=torch.float32)
    model.eval()
    fx = {"model_file": name, "transformers": __import__("transformers").__version__, "cases": []}
    for case, prefix, suffix in CASES:
        text = f"<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>"
        ids = tok(text, add_special_tokens=True)["input_ids"]
        gen, margins, _ = greedy(model, ids)
        fx["cases"].append({"name": case, "prefix": prefix, "suffix": suffix, "prompt_ids": ids,
                            "greedy_ids": gen, "margins": margins, "text": tok.decode(gen)})
        print(f"{case}: {len(ids)} prompt tokens -> {tok.decode(gen)!r}", flush=True)
    path = Path(__file__).resolve().parent.parent / "fixtures" / "reference" / "qwen2.5-coder-0.5b-fim.json"
    path.write_text(json.dumps(fx, ensure_ascii=False, indent=1) + "\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
