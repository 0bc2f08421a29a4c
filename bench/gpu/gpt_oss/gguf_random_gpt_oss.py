"""A random-weight GGUF of gpt-oss at its real shape, in the layout llama.cpp's converter writes
for an MXFP4 checkpoint (`gpt-oss`: the tensor names, types and metadata keys of
fixtures/arch/gpt_oss_mxfp4/model.gguf, which that converter made): experts MXFP4, attention,
embedding and output matrices BF16, router, norms, biases and sinks F32. For running ferrite and
llama.cpp side by side on one file.

    gguf_random_gpt_oss.py CONFIG.json VOCAB.gguf OUT.gguf

CONFIG: a transformers `gpt_oss` config (gpt-oss-20b.json). VOCAB: a GGUF whose tokenizer
fields are copied (padded with unused tokens up to vocab_size). MXFP4 blocks get random codes
and exponents around 2^-6 (weights of about 0.04: a row of 2,880 keeps activations O(1));
BF16 matrices N(0, 0.02); norms near 1, biases and sinks small. Needs numpy and gguf-py.
"""
import importlib.util
import json
import os
import sys

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "gguf_random_hybrid", os.path.join(HERE, "..", "hybrid", "gguf_random_hybrid.py"))
hybrid = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hybrid)

MXFP4_BLOCK, MXFP4_BYTES = 32, 17
KINDS = {  # kind -> (GGML type, bytes per element or per block)
    "mxfp4": gguf.GGMLQuantizationType.MXFP4,
    "bf16": gguf.GGMLQuantizationType.BF16,
}


class Tensors:
    def __init__(self, seed):
        self.items = []
        self.rng = np.random.default_rng(seed)

    def add(self, name, shape, kind):
        self.items.append((name, tuple(shape), kind))

    def nbytes(self, shape, kind):
        n = int(np.prod(shape))
        return {"mxfp4": n // MXFP4_BLOCK * MXFP4_BYTES, "bf16": 2 * n}.get(kind, 4 * n)

    def data(self, shape, kind):
        n = int(np.prod(shape))
        if kind == "mxfp4":
            blocks = n // MXFP4_BLOCK
            out = np.frombuffer(self.rng.bytes(blocks * MXFP4_BYTES), dtype=np.uint8).copy()
            out = out.reshape(blocks, MXFP4_BYTES)
            out[:, 0] = 121 + self.rng.integers(0, 2, blocks, dtype=np.uint8)  # 2^-6, 2^-5
            return out.reshape(*shape[:-1], shape[-1] // MXFP4_BLOCK * MXFP4_BYTES)
        if kind == "bf16":
            v = (0.02 * self.rng.standard_normal(n, dtype=np.float32)).view(np.uint32)
            return (v >> 16).astype(np.uint16).reshape(shape)
        if kind == "norm":
            v = 1.0 + 0.02 * self.rng.standard_normal(n)
        elif kind == "sink":
            v = self.rng.uniform(-1.0, 1.0, n)
        else:  # biases and the router
            v = 0.02 * self.rng.standard_normal(n)
        return v.astype(np.float32).reshape(shape)


def build(c):
    arch = "gpt-oss"
    hidden, layers, vocab = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    heads, kv_heads, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    experts, width = c["num_local_experts"], c["intermediate_size"]
    rope = c["rope_scaling"]
    kv = {
        f"{arch}.block_count": (layers, "u32"),
        f"{arch}.context_length": (c["max_position_embeddings"], "u32"),
        f"{arch}.embedding_length": (hidden, "u32"),
        f"{arch}.feed_forward_length": (width, "u32"),
        f"{arch}.attention.head_count": (heads, "u32"),
        f"{arch}.attention.head_count_kv": (kv_heads, "u32"),
        f"{arch}.rope.scaling.type": ("yarn", "str"),
        f"{arch}.rope.scaling.factor": (float(rope["factor"]), "f32"),
        f"{arch}.rope.scaling.original_context_length": (rope["original_max_position_embeddings"], "u32"),
        f"{arch}.rope.scaling.yarn_beta_fast": (float(rope["beta_fast"]), "f32"),
        f"{arch}.rope.scaling.yarn_beta_slow": (float(rope["beta_slow"]), "f32"),
        f"{arch}.rope.freq_base": (float(c["rope_theta"]), "f32"),
        f"{arch}.attention.layer_norm_rms_epsilon": (c["rms_norm_eps"], "f32"),
        f"{arch}.expert_count": (experts, "u32"),
        f"{arch}.expert_used_count": (c["num_experts_per_tok"], "u32"),
        f"{arch}.attention.key_length": (hd, "u32"),
        f"{arch}.attention.value_length": (hd, "u32"),
        f"{arch}.attention.sliding_window": (c["sliding_window"], "u32"),
        f"{arch}.expert_feed_forward_length": (width, "u32"),
    }
    t = Tensors(seed=0)
    # numpy order: [rows (output), cols (input)]; GGUF lists them reversed.
    t.add("token_embd.weight", (vocab, hidden), "bf16")
    t.add("output.weight", (vocab, hidden), "bf16")
    t.add("output_norm.weight", (hidden,), "norm")
    for i in range(layers):
        b = f"blk.{i}"
        t.add(f"{b}.attn_norm.weight", (hidden,), "norm")
        t.add(f"{b}.post_attention_norm.weight", (hidden,), "norm")
        for proj, rows in (("q", heads * hd), ("k", kv_heads * hd), ("v", kv_heads * hd)):
            t.add(f"{b}.attn_{proj}.weight", (rows, hidden), "bf16")
            t.add(f"{b}.attn_{proj}.bias", (rows,), "bias")
        t.add(f"{b}.attn_output.weight", (hidden, heads * hd), "bf16")
        t.add(f"{b}.attn_output.bias", (hidden,), "bias")
        t.add(f"{b}.attn_sinks.weight", (heads,), "sink")
        t.add(f"{b}.ffn_gate_inp.weight", (experts, hidden), "bias")
        t.add(f"{b}.ffn_gate_inp.bias", (experts,), "bias")
        t.add(f"{b}.ffn_gate_exps.weight", (experts, width, hidden), "mxfp4")
        t.add(f"{b}.ffn_up_exps.weight", (experts, width, hidden), "mxfp4")
        t.add(f"{b}.ffn_down_exps.weight", (experts, hidden, width), "mxfp4")
        t.add(f"{b}.ffn_gate_exps.bias", (experts, width), "bias")
        t.add(f"{b}.ffn_up_exps.bias", (experts, width), "bias")
        t.add(f"{b}.ffn_down_exps.bias", (experts, hidden), "bias")
    return arch, kv, t


def main():
    config_path, vocab_path, out = sys.argv[1:4]
    c = hybrid.text_config(config_path)
    arch, kv, tensors = build(c)
    w = gguf.GGUFWriter(out, arch)
    w.add_name(f"random {arch} {c['hidden_size']}x{c['num_hidden_layers']}")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_MXFP4_MOE)
    for key, (value, kind) in kv.items():
        {"u32": w.add_uint32, "f32": w.add_float32, "str": w.add_string}[kind](key, value)
    hybrid.copy_tokenizer(gguf.GGUFReader(vocab_path), w, c["vocab_size"])
    total = 0
    for name, shape, kind in tensors.items:
        nbytes = tensors.nbytes(shape, kind)
        if kind in KINDS:
            last = shape[-1] // MXFP4_BLOCK * MXFP4_BYTES if kind == "mxfp4" else shape[-1]
            dtype = np.uint8 if kind == "mxfp4" else np.uint16
            w.add_tensor_info(name, (*shape[:-1], last), np.dtype(dtype), nbytes, raw_dtype=KINDS[kind])
        else:
            w.add_tensor_info(name, shape, np.dtype(np.float32), nbytes)
        total += nbytes
    hybrid.stream_tensors(w, tensors, out, total)


if __name__ == "__main__":
    main()
