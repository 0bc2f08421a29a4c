#!/usr/bin/env python3
"""Writes a random-weight mixture-of-experts GGUF for the CPU side by side with llama.cpp
(issue 13): llama.cpp's `qwen3moe` layout (experts stacked [E, rows, cols] into
blk.N.ffn_{gate,up,down}_exps, a router blk.N.ffn_gate_inp, q/k norms), F16 weights drawn from a
seeded normal, the tokenizer copied from a real Qwen2.5 GGUF (same vocabulary as Qwen3) so both
engines load it as they would a real file. Quantize it afterwards with llama-quantize (see
bench/moe/make.sh). No real small MoE GGUF is on PyPI, hence random weights: the speed of a
step does not depend on the values, and the two engines read the same file.

The default shape is Qwen3-30B-A3B's (hidden 2048, 128 experts, top-8, expert width 768) cut to
fit a 2-core machine: hidden 1024, 16 layers, 64 experts, top 8, expert width 512 (every row a
whole number of Q4_K blocks of 256), 8 query heads of 128 over 2 KV heads.

    python3 bench/moe/make_gguf.py --tokenizer-from QWEN2.gguf --out moe-f16.gguf
"""

import argparse
import sys
import time

import numpy as np
import gguf


def copy_tokenizer(writer, path):
    """Every tokenizer.* key of `path` into `writer`, with its type."""
    reader = gguf.GGUFReader(path)
    copied = 0
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        main = field.types[0]
        value = field.contents()
        if main == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(key, value, main, sub_type=field.types[-1])
        else:
            writer.add_key_value(key, value, main)
        copied += 1
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    return copied, n_vocab


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizer-from", required=True, help="a GGUF with a Qwen2 tokenizer")
    p.add_argument("--out", required=True, help="the F16 GGUF to write")
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--experts", type=int, default=64)
    p.add_argument("--experts-per-token", type=int, default=8)
    p.add_argument("--expert-width", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()

    rng = np.random.default_rng(a.seed)
    w = gguf.GGUFWriter(a.out, "qwen3moe")
    copied, vocab = copy_tokenizer(w, a.tokenizer_from)
    h, e, f, hd = a.hidden, a.experts, a.expert_width, a.head_dim
    w.add_name(f"random qwen3moe {a.layers}x{h} {e}e top{a.experts_per_token}")
    w.add_block_count(a.layers)
    w.add_context_length(32768)
    w.add_embedding_length(h)
    w.add_feed_forward_length(f * a.experts_per_token)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_freq_base(1_000_000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_expert_count(e)
    w.add_expert_used_count(a.experts_per_token)
    w.add_expert_feed_forward_length(f)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    def normal(*shape, std=0.02):
        return (rng.standard_normal(shape, dtype=np.float32) * std).astype(np.float16)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)

    # numpy shapes are [rows, cols] (GGUF ne reversed): a linear layer is [out, in].
    w.add_tensor("token_embd.weight", normal(vocab, h))
    w.add_tensor("output_norm.weight", norm(h))
    w.add_tensor("output.weight", normal(vocab, h))
    for b in range(a.layers):
        pre = f"blk.{b}."
        w.add_tensor(pre + "attn_norm.weight", norm(h))
        w.add_tensor(pre + "attn_q.weight", normal(a.heads * hd, h))
        w.add_tensor(pre + "attn_k.weight", normal(a.kv_heads * hd, h))
        w.add_tensor(pre + "attn_v.weight", normal(a.kv_heads * hd, h))
        w.add_tensor(pre + "attn_output.weight", normal(h, a.heads * hd))
        w.add_tensor(pre + "attn_q_norm.weight", norm(hd))
        w.add_tensor(pre + "attn_k_norm.weight", norm(hd))
        w.add_tensor(pre + "ffn_norm.weight", norm(h))
        # A wider router spreads the tokens over the experts as a trained one roughly does.
        w.add_tensor(pre + "ffn_gate_inp.weight", (rng.standard_normal((e, h)) * 0.5).astype(np.float32))
        w.add_tensor(pre + "ffn_gate_exps.weight", normal(e, f, h))
        w.add_tensor(pre + "ffn_up_exps.weight", normal(e, f, h))
        w.add_tensor(pre + "ffn_down_exps.weight", normal(e, h, f))
        print(f"[make_gguf] layer {b + 1}/{a.layers} drawn", file=sys.stderr, flush=True)
    t = time.time()
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()
    print(f"[make_gguf] wrote {a.out} ({copied} tokenizer keys, vocab {vocab}) in {time.time() - t:.1f} s",
          file=sys.stderr)


if __name__ == "__main__":
    main()
