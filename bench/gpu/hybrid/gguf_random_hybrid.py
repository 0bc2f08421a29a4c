"""Random-weight GGUF files of the Qwen3.5 / Qwen3.6 hybrids at their real shapes, in the layout
llama.cpp's converter writes (`qwen35`, `qwen35moe`: the tensor names, shapes and metadata keys
of fixtures/arch/qwen3_5*/model.gguf, which that converter made), for running ferrite and
llama.cpp side by side on one file.

    gguf_random_hybrid.py CONFIG.json VOCAB.gguf OUT.gguf [--q4_k_m]

CONFIG: a transformers config (`text_config` or flat) of `qwen3_5` or `qwen3_5_moe`. VOCAB: a
GGUF whose tokenizer fields are copied, its token list padded with unused tokens up to the
config's vocab_size. Matrices are written as Q8_0 with random int8 values (weights of standard
deviation about 0.02): a real checkpoint's bf16 copy would not fit the device's disk beside
its quantized one, and `llama-quantize --allow-requantize OUT Q4_K_M` makes the Q4_K_M file
from this one as it would from F16. Vectors are F32: norms near 1, A = -uniform(1, 16) as
transformers' initialisation of A_log draws, dt_bias 1. Needs numpy and llama.cpp's gguf-py.

`--q4_k_m` writes the Q4_K_M file directly instead (no Q8_0 intermediate and no llama-quantize
pass: minutes of device time for a 35B model): random Q4_K blocks, Q6_K where llama.cpp's
Q4_K_M puts them (the output projection; attn_v and every ffn_down* in its "more bits"
layers), Q8_0 for rows that are not whole 256-element blocks. Random scales are small
(weights of a few hundredths); the speed of a product does not depend on its values.
"""
import json
import sys

import numpy as np
import gguf

Q8_0_BLOCK, Q8_0_BYTES = 32, 34
# Elements and bytes of a block of each type the writer emits.
BLOCKS = {"q8": (32, 34), "q4_k": (256, 144), "q6_k": (256, 210)}
GGML_TYPES = {
    "q8": gguf.GGMLQuantizationType.Q8_0,
    "q4_k": gguf.GGMLQuantizationType.Q4_K,
    "q6_k": gguf.GGMLQuantizationType.Q6_K,
}
UNUSED_TOKEN = 5  # llama.cpp's LLAMA_TOKEN_TYPE_UNUSED


def text_config(path):
    with open(path) as f:
        config = json.load(f)
    return config.get("text_config", config)


class Tensors:
    """Every tensor's name, numpy-order shape and kind ('q8' matrix or an 'f32' vector kind),
    then its bytes on demand, so the file streams."""

    def __init__(self, seed):
        self.items = []
        self.rng = np.random.default_rng(seed)

    def matrix(self, name, rows, cols):
        self.items.append((name, (rows, cols), "q8"))

    def stack(self, name, n, rows, cols):
        self.items.append((name, (n, rows, cols), "q8"))

    def vector(self, name, shape, kind):
        self.items.append((name, tuple(shape), kind))

    def blocks(self, shape, kind):
        """Random blocks of a K-quant type (kind `q4_k` or `q6_k`), valid and finite."""
        elements, size = BLOCKS[kind]
        blocks = int(np.prod(shape)) // elements
        out = np.frombuffer(self.rng.bytes(blocks * size), dtype=np.uint8).reshape(blocks, size).copy()
        if kind == "q4_k":  # d, dmin (f16), 12 bytes of 6-bit scales and mins, 128 of nibbles
            out[:, 0:2] = np.frombuffer(np.float16(2e-4).tobytes(), dtype=np.uint8)
            out[:, 2:4] = np.frombuffer(np.float16(2e-4).tobytes(), dtype=np.uint8)
        else:  # ql 128, qh 64, 16 int8 scales, d (f16)
            out[:, 208:210] = np.frombuffer(np.float16(1e-5).tobytes(), dtype=np.uint8)
        return out.reshape(*shape[:-1], shape[-1] // elements * size)

    def data(self, shape, kind):
        if kind in ("q4_k", "q6_k"):
            return self.blocks(shape, kind)
        if kind == "q8":
            count = int(np.prod(shape))
            blocks = count // Q8_0_BLOCK
            out = np.empty((blocks, Q8_0_BYTES), dtype=np.uint8)
            out[:, 2:] = np.frombuffer(self.rng.bytes(blocks * Q8_0_BLOCK), dtype=np.uint8).reshape(
                blocks, Q8_0_BLOCK)
            # int8 values uniform over [-128, 127] have a deviation of about 74.
            out[:, :2] = np.frombuffer(np.float16(0.02 / 74.0).tobytes(), dtype=np.uint8)
            return out.reshape(*shape[:-1], shape[-1] // Q8_0_BLOCK * Q8_0_BYTES)
        n = int(np.prod(shape))
        if kind == "norm":
            v = 1.0 + 0.02 * self.rng.standard_normal(n)
        elif kind == "decay":
            v = -self.rng.uniform(1.0, 16.0, n)
        elif kind == "ones":
            v = np.ones(n)
        elif kind == "conv":
            v = 0.3 * self.rng.standard_normal(n)
        else:  # small random matrices kept in F32 (routers)
            v = 0.02 * self.rng.standard_normal(n)
        return v.astype(np.float32).reshape(shape)


def build(c):
    moe = "num_experts" in c and c.get("num_experts")
    arch = "qwen35moe" if moe else "qwen35"
    hidden, layers, vocab = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    heads, kv_heads, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    nk, nv = c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv, taps = c["linear_key_head_dim"], c["linear_value_head_dim"], c["linear_conv_kernel_dim"]
    interval = c.get("full_attention_interval", 4)
    types = c.get("layer_types") or [
        "full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)]
    rope = c.get("rope_parameters") or {}
    partial = rope.get("partial_rotary_factor", c.get("partial_rotary_factor", 0.25))
    sections = list(rope.get("mrope_section", [11, 11, 10]))
    kv = {
        f"{arch}.block_count": (layers, "u32"),
        f"{arch}.context_length": (c.get("max_position_embeddings", 262144), "u32"),
        f"{arch}.embedding_length": (hidden, "u32"),
        f"{arch}.attention.head_count": (heads, "u32"),
        f"{arch}.attention.head_count_kv": (kv_heads, "u32"),
        f"{arch}.rope.dimension_sections": (sections + [0] * (4 - len(sections)), "arr"),
        f"{arch}.rope.freq_base": (float(rope.get("rope_theta", c.get("rope_theta", 1e7))), "f32"),
        f"{arch}.attention.layer_norm_rms_epsilon": (c.get("rms_norm_eps", 1e-6), "f32"),
        f"{arch}.attention.key_length": (hd, "u32"),
        f"{arch}.attention.value_length": (hd, "u32"),
        f"{arch}.ssm.conv_kernel": (taps, "u32"),
        f"{arch}.ssm.state_size": (dk, "u32"),
        f"{arch}.ssm.group_count": (nk, "u32"),
        f"{arch}.ssm.time_step_rank": (nv, "u32"),
        f"{arch}.ssm.inner_size": (nv * dv, "u32"),
        f"{arch}.full_attention_interval": (interval, "u32"),
        f"{arch}.rope.dimension_count": (int(hd * partial), "u32"),
    }
    if moe:
        kv.update({
            f"{arch}.expert_count": (c["num_experts"], "u32"),
            f"{arch}.expert_used_count": (c["num_experts_per_tok"], "u32"),
            f"{arch}.expert_feed_forward_length": (c["moe_intermediate_size"], "u32"),
            f"{arch}.expert_shared_feed_forward_length": (c["shared_expert_intermediate_size"], "u32"),
        })
    else:
        kv[f"{arch}.feed_forward_length"] = (c["intermediate_size"], "u32")

    t = Tensors(seed=0)
    # numpy order: [rows (output), cols (input)]; GGUF lists them reversed.
    t.matrix("token_embd.weight", vocab, hidden)
    if not c.get("tie_word_embeddings", False):
        t.matrix("output.weight", vocab, hidden)
    t.vector("output_norm.weight", [hidden], "norm")
    channels = 2 * nk * dk + nv * dv
    for i, kind in enumerate(types):
        b = f"blk.{i}"
        t.vector(f"{b}.attn_norm.weight", [hidden], "norm")
        t.vector(f"{b}.post_attention_norm.weight", [hidden], "norm")
        if kind == "linear_attention":
            t.vector(f"{b}.ssm_a", [nv], "decay")
            t.vector(f"{b}.ssm_conv1d.weight", [channels, taps], "conv")
            t.vector(f"{b}.ssm_dt.bias", [nv], "ones")
            t.matrix(f"{b}.ssm_alpha.weight", nv, hidden)
            t.matrix(f"{b}.ssm_beta.weight", nv, hidden)
            t.matrix(f"{b}.attn_qkv.weight", channels, hidden)
            t.matrix(f"{b}.attn_gate.weight", nv * dv, hidden)
            t.vector(f"{b}.ssm_norm.weight", [dv], "norm")
            t.matrix(f"{b}.ssm_out.weight", hidden, nv * dv)
        else:
            t.matrix(f"{b}.attn_q.weight", 2 * heads * hd, hidden)
            t.matrix(f"{b}.attn_k.weight", kv_heads * hd, hidden)
            t.matrix(f"{b}.attn_v.weight", kv_heads * hd, hidden)
            t.matrix(f"{b}.attn_output.weight", hidden, heads * hd)
            t.vector(f"{b}.attn_q_norm.weight", [hd], "norm")
            t.vector(f"{b}.attn_k_norm.weight", [hd], "norm")
        if moe:
            e, w, ws = c["num_experts"], c["moe_intermediate_size"], c["shared_expert_intermediate_size"]
            t.vector(f"{b}.ffn_gate_inp.weight", [e, hidden], "router")
            t.stack(f"{b}.ffn_gate_exps.weight", e, w, hidden)
            t.stack(f"{b}.ffn_up_exps.weight", e, w, hidden)
            t.stack(f"{b}.ffn_down_exps.weight", e, hidden, w)
            t.matrix(f"{b}.ffn_gate_shexp.weight", ws, hidden)
            t.matrix(f"{b}.ffn_up_shexp.weight", ws, hidden)
            t.matrix(f"{b}.ffn_down_shexp.weight", hidden, ws)
            t.vector(f"{b}.ffn_gate_inp_shexp.weight", [1, hidden], "router")
        else:
            inter = c["intermediate_size"]
            t.matrix(f"{b}.ffn_gate.weight", inter, hidden)
            t.matrix(f"{b}.ffn_up.weight", inter, hidden)
            t.matrix(f"{b}.ffn_down.weight", hidden, inter)
    return arch, kv, t


def copy_tokenizer(reader, writer, vocab_size):
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        if field.name == "tokenizer.ggml.tokens":
            tokens = list(field.contents())
            tokens += [f"<|unused_{i}|>" for i in range(len(tokens), vocab_size)]
            writer.add_token_list(tokens)
        elif field.name == "tokenizer.ggml.token_type":
            types = list(field.contents())
            types += [UNUSED_TOKEN] * (vocab_size - len(types))
            writer.add_token_types(types)
        else:
            vtype = field.types[0]
            sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)


def stream_tensors(w, tensors, out, total):
    """Writes the header, the metadata and tensor infos added to `w`, then each tensor's bytes
    one at a time (tensors.data), so the file never sits whole in memory."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for i, (name, shape, kind) in enumerate(tensors.items):
        w.write_tensor_data(tensors.data(shape, kind))
        if i % 50 == 0:
            print(f"{i + 1}/{len(tensors.items)} tensors", file=sys.stderr, flush=True)
    w.close()
    print(f"{out}: {len(tensors.items)} tensors, {total / 1e9:.2f} GB", file=sys.stderr)


def more_bits(i, n):
    """llama.cpp's choice of Q6_K over Q4_K for some attn_v / ffn_down tensors in Q4_K_M."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def q4_k_m_kinds(tensors, layers):
    """Each Q8_0 matrix's type in Q4_K_M (see the module doc)."""
    attn_v = [name for name, _, _ in tensors.items if name.endswith(".attn_v.weight")]
    for j, (name, shape, kind) in enumerate(tensors.items):
        if kind != "q8" or shape[-1] % 256:
            continue
        layer = int(name.split(".")[1]) if name.startswith("blk.") else None
        wide = name == "output.weight"
        if name.endswith(".attn_v.weight"):
            wide = more_bits(attn_v.index(name), len(attn_v))
        elif ".ffn_down" in name:
            wide = more_bits(layer, layers)
        tensors.items[j] = (name, shape, "q6_k" if wide else "q4_k")


def main():
    config_path, vocab_path, out = sys.argv[1:4]
    c = text_config(config_path)
    arch, kv, tensors = build(c)
    q4_k_m = "--q4_k_m" in sys.argv[4:]
    if q4_k_m:
        q4_k_m_kinds(tensors, c["num_hidden_layers"])
    w = gguf.GGUFWriter(out, arch)
    w.add_name(f"random {arch} {c['hidden_size']}x{c['num_hidden_layers']}")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M if q4_k_m else gguf.LlamaFileType.MOSTLY_Q8_0)
    for key, (value, kind) in kv.items():
        if kind == "u32":
            w.add_uint32(key, value)
        elif kind == "f32":
            w.add_float32(key, value)
        else:
            w.add_array(key, value)
    copy_tokenizer(gguf.GGUFReader(vocab_path), w, c["vocab_size"])
    total = 0
    for name, shape, kind in tensors.items:
        if kind in BLOCKS:
            elements, size = BLOCKS[kind]
            nbytes = int(np.prod(shape)) // elements * size
            byte_shape = (*shape[:-1], shape[-1] // elements * size)
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes,
                              raw_dtype=GGML_TYPES[kind])
        else:
            nbytes = int(np.prod(shape)) * 4
            w.add_tensor_info(name, shape, np.dtype(np.float32), nbytes)
        total += nbytes
    stream_tensors(w, tensors, out, total)


if __name__ == "__main__":
    main()
