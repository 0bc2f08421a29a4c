#!/usr/bin/env python3
"""A Hugging Face model directory made from a GGUF file, for ferrite's safetensors-loader and
hub tests: the GGUF's tensors dequantized by gguf-py (llama.cpp's own reference code, not
ferrite's), llama's Q/K rows put back from llama.cpp's interleaved-RoPE order into Hugging
Face's rotate-half order (transformers' `reverse_permute`), renamed to transformers' names and
written as sharded safetensors with an index, plus config.json, tokenizer.json,
tokenizer_config.json, chat_template.jinja and generation_config.json. Loading this directory
must give back the GGUF's model: ferrite serves both with the same tokens.

Usage: python scripts/make_hf_test_dir.py GGUF_FILE OUT_DIR [--dtype bf16|f32] [--shard-mb N]
Needs numpy and gguf (pip install numpy gguf); the e2e venv has both.
"""
import argparse
import json
import shutil
from pathlib import Path

import numpy as np
from gguf import GGUFReader, GGMLQuantizationType
from gguf.quants import dequantize

from byte_level import byte_alphabet

# Bump when the output changes, so cached directories are rebuilt.
FORMAT_VERSION = 1

HF_LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
HF_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}

# tokenizer.ggml.pre -> the split regex transformers' GGUF converter puts before ByteLevel
# (None: GPT-2's own ByteLevel regex). The same table as ferrite's gguf_bpe.rs, for these two.
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
               r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
                r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPLITS = {"qwen2": QWEN2_SPLIT, "llama-bpe": LLAMA3_SPLIT, "llama3": LLAMA3_SPLIT}
TOKEN_TYPE_CONTROL, TOKEN_TYPE_USER_DEFINED = 3, 4


class Meta:
    def __init__(self, reader):
        self.fields = reader.fields

    def get(self, key, default=None):
        field = self.fields.get(key)
        return default if field is None else field.contents()


def hf_name(gguf_name):
    if gguf_name in HF_NAMES:
        return HF_NAMES[gguf_name]
    _, layer, module, kind = gguf_name.split(".")
    return f"model.layers.{layer}.{HF_LAYER_NAMES[module]}.{kind}"


def reverse_permute(w, n_head):
    """Undo llama.cpp's permute(): within each head, row 2*i + j goes back to j*half + i."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def to_bf16_bits(a):
    """float32 -> bf16 bit patterns, rounding to nearest even (as torch does)."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def tensors(reader, meta, arch, dtype):
    heads = meta.get(f"{arch}.attention.head_count")
    kv_heads = meta.get(f"{arch}.attention.head_count_kv", heads)
    for t in reader.tensors:
        shape = [int(d) for d in reversed(t.shape)]
        w = dequantize(t.data, GGMLQuantizationType(t.tensor_type)).reshape(shape).astype(np.float32)
        module = t.name.split(".")[2] if t.name.startswith("blk.") else None
        if arch == "llama" and module in ("attn_q", "attn_k"):
            w = reverse_permute(w, heads if module == "attn_q" else kv_heads)
        if dtype == "bf16" and w.ndim == 2:
            yield hf_name(t.name), "BF16", shape, to_bf16_bits(w).tobytes()
        else:
            # Norm weights and biases stay f32, as transformers keeps them precise enough anyway.
            yield hf_name(t.name), "F32", shape, w.tobytes()


def write_safetensors(path, items):
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, dtype, shape, data in items:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for _, _, _, data in items:
            f.write(data)


def write_weights(out, items, shard_bytes):
    shards, current, size = [], [], 0
    for item in items:
        if current and size + len(item[3]) > shard_bytes:
            shards.append(current)
            current, size = [], 0
        current.append(item)
        size += len(item[3])
    shards.append(current)
    weight_map, total = {}, 0
    for i, shard in enumerate(shards):
        file = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        write_safetensors(out / file, shard)
        for name, _, _, data in shard:
            weight_map[name] = file
            total += len(data)
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
    return "lm_head.weight" not in weight_map


def tokenizer_json(meta):
    if meta.get("tokenizer.ggml.model") != "gpt2":
        raise SystemExit("only gpt2-style byte-level BPE tokenizers are supported")
    tokens = meta.get("tokenizer.ggml.tokens")
    types = meta.get("tokenizer.ggml.token_type", [])
    table = byte_alphabet()
    alphabet = set(table.values())
    in_alphabet = lambda t: all(c in alphabet for c in t)
    vocab = {}
    for i, t in enumerate(tokens):
        vocab[t if in_alphabet(t) else "".join(table[b] for b in t.encode())] = i
    merges = [m.split(" ", 1) for m in meta.get("tokenizer.ggml.merges")]
    added = []
    for i, (t, ty) in enumerate(zip(tokens, types)):
        if (ty == TOKEN_TYPE_CONTROL and in_alphabet(t)) or (ty == TOKEN_TYPE_USER_DEFINED and t in vocab):
            added.append({"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": ty == TOKEN_TYPE_CONTROL})
    split = SPLITS.get(meta.get("tokenizer.ggml.pre", ""))
    if split is None:
        pre = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    else:
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": split}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        ]}
    post = None
    bos = meta.get("tokenizer.ggml.bos_token_id")
    if meta.get("tokenizer.ggml.add_bos_token", False) and bos is not None:
        b = tokens[bos]
        post = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": b, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": b, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": b, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {b: {"id": b, "ids": [bos], "tokens": [b]}}}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None, "pre_tokenizer": pre, "post_processor": post,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": merges},
    }


def config_json(meta, arch, tied, dtype):
    key = lambda k, d=None: meta.get(f"{arch}.{k}", d)
    heads = key("attention.head_count")
    tokens = meta.get("tokenizer.ggml.tokens")
    return {
        "architectures": [ARCHITECTURES[arch]],
        "model_type": arch,
        "vocab_size": key("vocab_size", len(tokens)),
        "hidden_size": key("embedding_length"),
        "intermediate_size": key("feed_forward_length"),
        "num_hidden_layers": key("block_count"),
        "num_attention_heads": heads,
        "num_key_value_heads": key("attention.head_count_kv", heads),
        "rope_theta": key("rope.freq_base", 10000.0),
        "rms_norm_eps": key("attention.layer_norm_rms_epsilon"),
        "max_position_embeddings": key("context_length"),
        "tie_word_embeddings": tied,
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
        "hidden_act": "silu",
        "torch_dtype": "bfloat16" if dtype == "bf16" else "float32",
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    ap.add_argument("--shard-mb", type=int, default=100)
    args = ap.parse_args()
    reader = GGUFReader(args.gguf)
    meta = Meta(reader)
    arch = meta.get("general.architecture")
    if arch not in ARCHITECTURES:
        raise SystemExit(f"architecture {arch} is not supported")
    tmp = args.out.with_name(args.out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tied = write_weights(tmp, list(tensors(reader, meta, arch, args.dtype)), args.shard_mb << 20)
    (tmp / "config.json").write_text(json.dumps(config_json(meta, arch, tied, args.dtype), indent=1))
    (tmp / "tokenizer.json").write_text(json.dumps(tokenizer_json(meta), ensure_ascii=False))
    tokens = meta.get("tokenizer.ggml.tokens")
    name = lambda key: None if meta.get(key) is None else tokens[meta.get(key)]
    tok_config = {"bos_token": name("tokenizer.ggml.bos_token_id"), "eos_token": name("tokenizer.ggml.eos_token_id"),
                  "add_bos_token": bool(meta.get("tokenizer.ggml.add_bos_token", False)),
                  "tokenizer_class": "PreTrainedTokenizerFast"}
    (tmp / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=1))
    template = meta.get("tokenizer.chat_template")
    if template:
        (tmp / "chat_template.jinja").write_text(template)
    generation = {"bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
                  "eos_token_id": meta.get("tokenizer.ggml.eos_token_id")}
    (tmp / "generation_config.json").write_text(json.dumps(generation, indent=1))
    shutil.rmtree(args.out, ignore_errors=True)
    tmp.rename(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
