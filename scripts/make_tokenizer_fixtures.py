#!/usr/bin/env python3
"""Token ids from Hugging Face transformers for ferrite's tokenizer tests.

transformers builds its tokenizer from the GGUF metadata on its own (AutoTokenizer with
gguf_file=...), which makes it an independent oracle for ferrite's GGUF tokenizer.

Usage: /work/venv-fixtures/bin/python scripts/make_tokenizer_fixtures.py [name ...]
Writes fixtures/tokenizer/{smollm2,qwen2.5-coder-0.5b,gemma3-270m}.json (the names given, or all).
gemma3-270m (a sentencepiece vocabulary, `tokenizer.ggml.model = llama`) was made with
transformers 5.25.0.
"""
import json
import os
import pathlib

from transformers import AutoTokenizer

MODELS = pathlib.Path(os.environ.get("FERRITE_MODELS", pathlib.Path.home() / ".cache/ferrite/models"))
OUT = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "tokenizer"

FILES = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "qwen2.5-coder-0.5b": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "gemma3-270m": "gemma-3-270m-q4_k_m.gguf",
}

TEXTS = [
    "Hello world",
    "What is the capital of France?",
    " leading space and trailing space ",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < 10; ++i) { printf(\"%d\\n\", i); }",
    "Numbers: 7, 42, 1234, 3.14159, 1000000000000, -98765432101234567890",
    "tabs\tand\t\ttabs, spaces     runs,\n\n\nnewlines\r\nand CRLF\n \n",
    "Emoji: 🦀🔥👍🏽 and 👨‍👩‍👧‍👦 family",
    "中文测试：你好，世界！日本語のテキスト、한국어 텍스트",
    "Accents: café, naïve, façade, Ångström, Straße, Łódź, crème brûlée",
    "Ελληνικά και русский текст, עברית, العربية",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>text after special<|endoftext|>",
    "<tool_call>{\"name\": \"f\"}</tool_call> <|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>",
    "I'm sure you've seen THEY'LL and it's John's, we'd",
    "   ",
    "",
    "x" * 300,
    "https://example.com/path?query=1&b=2#frag user@mail.org",
    "Mixed123abc456 ABC_def-ghi.jkl",
    "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
    "  two leading spaces,  two inside and a tab\there  ",
    "\u00a0nbsp\u2009thin space and a lone \u2581 lower one eighth block",
]


def main():
    import sys

    OUT.mkdir(parents=True, exist_ok=True)
    wanted = sys.argv[1:] or list(FILES)
    for name, file in FILES.items():
        if name not in wanted:
            continue
        tok = AutoTokenizer.from_pretrained(str(MODELS), gguf_file=file)
        cases = []
        for text in TEXTS:
            for add_special in (False, True):
                ids = tok(text, add_special_tokens=add_special)["input_ids"]
                cases.append({"text": text, "add_special_tokens": add_special, "ids": ids})
        decode = [
            {"ids": c["ids"], "skip_special_tokens": skip, "text": tok.decode(c["ids"], skip_special_tokens=skip)}
            for c in cases[::2]
            for skip in (False, True)
        ]
        out = {
            "model_file": file,
            "bos_token": tok.bos_token,
            "eos_token": tok.eos_token,
            "vocab_size": len(tok),
            "tokenize": cases,
            "decode": decode,
        }
        (OUT / f"{name}.json").write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
        print(f"wrote {OUT / (name + '.json')}: {len(cases)} cases")


if __name__ == "__main__":
    main()
