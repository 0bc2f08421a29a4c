"""On the H200: an 8B-shape (Llama 3.1 8B) bf16 Hugging Face checkpoint with random weights,
written as a real one is (config.json, sharded model-0000N-of-0000M.safetensors with an index,
tokenizer files, generation_config.json), and the same weights as a GGUF F16 file (llama
architecture, so Q and K rows are permuted to GGUF's interleaved RoPE order, as llama.cpp's
converter does). The tokenizer is SmolLM2's (export_tokenizer.py), padded to the 128,256-row
vocabulary. Usage: write_checkpoint.py TOKENIZER_DIR OUT_HF_DIR OUT_GGUF"""
import json
import shutil
import struct
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

tok_dir, hf_dir, gguf_path = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
C = dict(hidden=4096, inter=14336, layers=32, heads=32, kv_heads=8, vocab=128256, head_dim=128)
SHARD_BYTES = 5 << 30

config = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": C["hidden"],
    "intermediate_size": C["inter"], "num_hidden_layers": C["layers"],
    "num_attention_heads": C["heads"], "num_key_value_heads": C["kv_heads"],
    "vocab_size": C["vocab"], "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0, "hidden_act": "silu", "tie_word_embeddings": False,
    "attention_bias": False, "mlp_bias": False, "head_dim": C["head_dim"],
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
    "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16",
}


def tensors():
    """(HF name, GGUF name, tensor) in file order, drawn on the GPU."""
    g = torch.Generator(device="cuda").manual_seed(0)
    h, i, hd = C["hidden"], C["inter"], C["head_dim"]
    q, kv = C["heads"] * hd, C["kv_heads"] * hd

    def w(rows, cols):
        return (torch.randn(rows, cols, generator=g, device="cuda") * cols ** -0.5).bfloat16()

    def norm():
        return torch.ones(h, device="cuda", dtype=torch.bfloat16)

    yield "model.embed_tokens.weight", "token_embd.weight", w(C["vocab"], h)
    for l in range(C["layers"]):
        p, b = f"model.layers.{l}.", f"blk.{l}."
        yield p + "input_layernorm.weight", b + "attn_norm.weight", norm()
        yield p + "self_attn.q_proj.weight", b + "attn_q.weight", w(q, h)
        yield p + "self_attn.k_proj.weight", b + "attn_k.weight", w(kv, h)
        yield p + "self_attn.v_proj.weight", b + "attn_v.weight", w(kv, h)
        yield p + "self_attn.o_proj.weight", b + "attn_output.weight", w(h, q)
        yield p + "post_attention_layernorm.weight", b + "ffn_norm.weight", norm()
        yield p + "mlp.gate_proj.weight", b + "ffn_gate.weight", w(i, h)
        yield p + "mlp.up_proj.weight", b + "ffn_up.weight", w(i, h)
        yield p + "mlp.down_proj.weight", b + "ffn_down.weight", w(h, i)
    yield "model.norm.weight", "output_norm.weight", norm()
    yield "lm_head.weight", "output.weight", w(C["vocab"], h)


def permute_for_gguf(t, heads):
    """HF's rotate-half Q/K rows to GGUF's interleaved pairs (llama.cpp's convert permutation)."""
    rows, cols = t.shape
    return t.reshape(heads, 2, rows // heads // 2, cols).swapaxes(1, 2).reshape(rows, cols)


# --- GGUF (version 3) ------------------------------------------------------------------------
U32, I32, F32, BOOL, STR, ARR = 4, 5, 6, 7, 8, 9


def gguf_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, kind, value):
    out = gguf_str(key)
    if kind == "string" and isinstance(value, list):
        out += struct.pack("<IIQ", ARR, STR, len(value)) + b"".join(gguf_str(v) for v in value)
    elif kind == "int32" and isinstance(value, list):
        out += struct.pack("<IIQ", ARR, I32, len(value)) + struct.pack(f"<{len(value)}i", *value)
    elif kind == "string":
        out += struct.pack("<I", STR) + gguf_str(value)
    elif kind == "bool":
        out += struct.pack("<IB", BOOL, int(value))
    elif kind == "float32":
        out += struct.pack("<If", F32, value)
    else:
        out += struct.pack("<II", U32, value)
    return out


def main():
    started = time.time()
    hf_dir.mkdir(parents=True, exist_ok=True)
    meta = json.loads((tok_dir / "tokenizer_meta.json").read_text())
    pad = C["vocab"] - len(meta["tokenizer.ggml.tokens"][1])
    meta["tokenizer.ggml.tokens"][1] += [f"<|reserved_{k}|>" for k in range(pad)]
    meta["tokenizer.ggml.token_type"][1] += [3] * pad  # control tokens
    kvs = [gguf_kv("general.architecture", "string", "llama"),
           gguf_kv("general.name", "string", "random llama-3.1-8b shape")]
    for key, kind, value in [
        ("context_length", "uint32", 131072), ("embedding_length", "uint32", C["hidden"]),
        ("block_count", "uint32", C["layers"]), ("feed_forward_length", "uint32", C["inter"]),
        ("attention.head_count", "uint32", C["heads"]),
        ("attention.head_count_kv", "uint32", C["kv_heads"]),
        ("rope.freq_base", "float32", 500000.0),
        ("attention.layer_norm_rms_epsilon", "float32", 1e-5),
        ("vocab_size", "uint32", C["vocab"]),
    ]:
        kvs.append(gguf_kv("llama." + key, kind, value))
    kvs += [gguf_kv(k, kind, v) for k, (kind, v) in meta.items()]

    # Safetensors shards as the tensors come; the GGUF's tensors are staged in host memory.
    shard, shard_bytes, shards, index, gguf_tensors = {}, 0, [], {}, []
    def flush():
        nonlocal shard, shard_bytes
        if shard:
            shards.append(shard)
            shard, shard_bytes = {}, 0
    for hf_name, gguf_name, t in tensors():
        if shard_bytes + t.numel() * 2 > SHARD_BYTES:
            flush()
        shard[hf_name] = t.cpu()
        shard_bytes += t.numel() * 2
        g = t
        if gguf_name.endswith("attn_q.weight"):
            g = permute_for_gguf(t, C["heads"])
        elif gguf_name.endswith("attn_k.weight"):
            g = permute_for_gguf(t, C["kv_heads"])
        is_norm = g.dim() == 1
        gguf_tensors.append((gguf_name, (g.float() if is_norm else g.half()).cpu()))
    flush()
    for k, s in enumerate(shards):
        name = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(s, hf_dir / name, metadata={"format": "pt"})
        index.update({n: name for n in s})
    total = sum(t.numel() * 2 for s in shards for t in s.values())
    (hf_dir / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": index}))
    (hf_dir / "config.json").write_text(json.dumps(config, indent=1))
    (hf_dir / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}))
    for f in ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja"]:
        if (tok_dir / f).exists():
            shutil.copy(tok_dir / f, hf_dir / f)
    print(f"safetensors: {len(shards)} shards, {total / 1e9:.2f} GB, {time.time() - started:.0f} s",
          flush=True)

    infos, offset = b"", 0
    align = lambda n: (n + 31) // 32 * 32
    for name, t in gguf_tensors:
        dims = list(reversed(t.shape))
        kind = 0 if t.dtype == torch.float32 else 1  # F32, F16
        infos += gguf_str(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        infos += struct.pack("<IQ", kind, offset)
        offset = align(offset + t.numel() * t.element_size())
    header = b"GGUF" + struct.pack("<IQQ", 3, len(gguf_tensors), len(kvs)) + b"".join(kvs) + infos
    with open(gguf_path, "wb") as f:
        f.write(header)
        f.write(b"\0" * (align(len(header)) - len(header)))
        pos = 0
        for _, t in gguf_tensors:
            raw = t.contiguous().view(torch.uint8).numpy().tobytes()
            f.write(raw)
            pos += len(raw)
            f.write(b"\0" * (align(pos) - pos))
            pos = align(pos)
    print(f"gguf f16: {gguf_path.stat().st_size / 1e9:.2f} GB, {time.time() - started:.0f} s total",
          flush=True)


main()
