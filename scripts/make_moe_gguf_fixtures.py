#!/usr/bin/env python3
"""The mixture-of-experts fixtures of fixtures/arch/ in llama.cpp's GGUF layout, written with
gguf-py from the checkpoints make_arch_fixtures.py saved, the way llama.cpp's
convert_hf_to_gguf.py converts such a checkpoint:

- tensor names from gguf-py's TensorNameMap, each layer's experts stacked [E, rows, cols] into
  blk.N.ffn_{gate,up,down}_exps (merged under the name convert_hf_to_gguf gives the stack);
- mixtral is written as llama.cpp's `llama` architecture with experts, its q/k projections
  permuted for llama.cpp's interleaved rope (convert_hf_to_gguf's LlamaModel.permute);
- qwen2_moe keeps its shared expert (ffn_{gate,up,down}_shexp, the sigmoid gate
  ffn_gate_inp_shexp) and its dense layer, under the plain ffn_gate/up/down names with no
  router (llama.cpp's qwen2moe has no dense layers, so convert_hf_to_gguf would refuse this
  checkpoint; ferrite reads a layer without a router as dense);
- router and norms F32; everything else BF16 (exact: the checkpoints are bf16), except
  qwen3_moe's experts, Q8_0 (gguf-py's reference quantizer), as a quantized GGUF user has them.

Writes fixtures/arch/qwen3_moe/model-experts-q8_0.gguf, mixtral/model-bf16.gguf and
qwen2_moe/model-bf16.gguf. Needs only numpy and gguf-py (pip install gguf numpy): the
safetensors files are read directly. No tokenizer: the engine tests read the weights only.

Usage: python3 scripts/make_moe_gguf_fixtures.py [ARCH ...]   (default: all three)
"""
import json
import re
import struct
import sys
from pathlib import Path

import gguf
import numpy as np

OUT = Path(__file__).resolve().parent.parent / "fixtures" / "arch"
Q = gguf.GGMLQuantizationType

# arch -> (gguf-py architecture, output file, expert regex, per-expert projection -> merged name
# convert_hf_to_gguf maps the stack from)
LAYOUTS = {
    "qwen3_moe": (gguf.MODEL_ARCH.QWEN3MOE, "model-experts-q8_0.gguf",
                  r"model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(\w+)\.weight",
                  "model.layers.{bid}.mlp.experts.{proj}.weight"),
    "qwen2_moe": (gguf.MODEL_ARCH.QWEN2MOE, "model-bf16.gguf",
                  r"model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(\w+)\.weight",
                  "model.layers.{bid}.mlp.experts.{proj}.weight"),
    "mixtral": (gguf.MODEL_ARCH.LLAMA, "model-bf16.gguf",
                r"model\.layers\.(\d+)\.block_sparse_moe\.experts\.(\d+)\.(\w+)\.weight",
                "model.layers.{bid}.block_sparse_moe.experts.{proj}.weight"),
}


def read_safetensors(path):
    """name -> float32 array, for the BF16/F32 tensors a save_pretrained file holds."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        buf = raw[base + lo:base + hi]
        if info["dtype"] == "BF16":
            bits = np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32)
        elif info["dtype"] == "F32":
            arr = np.frombuffer(buf, dtype="<f4").copy()
        else:
            sys.exit(f"{path}: {name} is {info['dtype']}, expected BF16 or F32")
        out[name] = arr.reshape(info["shape"])
    return out


def permute(w, n_head):
    """convert_hf_to_gguf's LlamaModel.permute: each head's rows from the rotate-half order
    transformers uses to the interleaved pairs llama.cpp's `llama` rope expects."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def add_metadata(w, arch, cfg):
    # In the order make_arch_fixtures.py first wrote qwen3_moe's, so that file stays byte for byte.
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    if arch == "qwen3_moe":
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    if arch == "mixtral":
        w.add_expert_count(cfg["num_local_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        w.add_rope_dimension_count(cfg["hidden_size"] // cfg["num_attention_heads"])
        w.add_vocab_size(cfg["vocab_size"])
        return
    w.add_expert_count(cfg["num_experts"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    if arch == "qwen2_moe":
        w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])


def tensor_type(arch, name, data):
    if data.ndim == 1 or name.endswith("ffn_gate_inp.weight"):
        return Q.F32
    if "_exps." in name and arch == "qwen3_moe":
        return Q.Q8_0
    return Q.BF16


def write(arch):
    gguf_arch, file_name, expert_re, merged = LAYOUTS[arch]
    d = OUT / arch
    cfg = json.loads((d / "config.json").read_text())
    layers = cfg["num_hidden_layers"]
    name_map = gguf.get_tensor_name_map(gguf_arch, layers)
    per_expert, out = {}, {}
    for name, t in read_safetensors(d / "model.safetensors").items():
        m = re.fullmatch(expert_re, name)
        if m:
            per_expert.setdefault((int(m[1]), m[3]), {})[int(m[2])] = t
            continue
        if arch == "mixtral" and name.endswith(("q_proj.weight", "k_proj.weight")):
            heads = cfg["num_attention_heads"] if "q_proj" in name else cfg["num_key_value_heads"]
            t = permute(t, heads)
        mapped = name_map.get_name(name, try_suffixes=(".weight", ".bias"))
        dense = re.fullmatch(r"model\.layers\.(\d+)\.mlp\.(gate|up|down)_proj\.weight", name)
        if mapped is None and dense:
            # qwen2_moe's dense layer (mlp_only_layers): llama.cpp's qwen2moe has none, so
            # gguf-py has no name for it; it gets the dense MLP names of every other family.
            mapped = f"blk.{dense[1]}.ffn_{dense[2]}.weight"
        if mapped is None:
            sys.exit(f"{arch}: no GGUF name for {name}")
        out[mapped] = t
    for (bid, proj), by_id in per_expert.items():
        stacked = np.stack([by_id[e] for e in range(len(by_id))], axis=0)
        mapped = name_map.get_name(merged.format(bid=bid, proj=proj), try_suffixes=(".weight",))
        if mapped is None:
            sys.exit(f"{arch}: no GGUF name for the stacked {proj} of layer {bid}")
        out[mapped] = stacked
    path = d / file_name
    w = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[gguf_arch])
    add_metadata(w, arch, cfg)
    types = {}
    for name in sorted(out):
        data = np.ascontiguousarray(out[name], dtype=np.float32)
        qtype = tensor_type(arch, name, data)
        types[qtype.name] = types.get(qtype.name, 0) + 1
        if qtype == Q.F32:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = gguf.GGUFReader(path)
    exps = [t for t in r.tensors if t.name == "blk.0.ffn_down_exps.weight"][0]
    print(f"  {arch}: wrote {path.name}: {len(r.tensors)} tensors {types}, "
          f"blk.0.ffn_down_exps ne {list(exps.shape)}, {path.stat().st_size / 1e6:.2f} MB")


def main():
    archs = sys.argv[1:] or list(LAYOUTS)
    for arch in archs:
        if arch not in LAYOUTS:
            sys.exit(f"unknown arch {arch}; known: {' '.join(LAYOUTS)}")
    for arch in archs:
        write(arch)


if __name__ == "__main__":
    main()
