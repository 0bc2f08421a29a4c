#!/usr/bin/env python3
"""GGUF copies of the hybrid Gated DeltaNet fixtures, written by llama.cpp's own converter.

For fixtures/arch/{qwen3_next,qwen3_5,qwen3_5_moe} this script
  1. copies config.json, generation_config.json and model.safetensors (untouched) into a temporary
     directory named after the fixture,
  2. adds a minimal byte-level BPE tokenizer (tokenizer.json + tokenizer_config.json) with exactly
     `vocab_size` tokens: ids 0-242 are the 243 bytes that can occur in UTF-8 (all but 0xC0, 0xC1,
     0xF5-0xFF; GPT-2 byte-to-unicode spelling, so id = byte value below 0xC0), then first-level
     merges ("Ġe", "Ġt", ..., then letter pairs), and as the last 3 ids the special tokens
     <|endoftext|>, <|im_start|>, <|im_end|>: 10 merges for vocab 256, 266 for vocab 512 (qwen3_5).
     At least one merge, because llama.cpp refuses a gpt2 vocabulary without
     tokenizer.ggml.merges; <|endoftext|> in the vocabulary, because transformers loads a Qwen3.5
     directory with its Qwen3_5Tokenizer (whatever tokenizer_class says), which appends that token
     when it is missing. BOS / EOS ids are left to config.json (1 / 2, bytes 0x01 / 0x02, as the
     fixtures' generation_config). Pre-tokenizer: the split regex of the real family (Qwen2's for
     Qwen3-Next, Qwen3.5's for the other two), NFC normalizer,
  3. runs llama.cpp's convert_hf_to_gguf.py (its main(), with its own gguf-py) with
     `--outtype bf16`, writing fixtures/arch/ARCH/model.gguf,
  4. checks the file (check()): the exact set of tensor names, each tensor's type and shape, and
     every value against the safetensors weights put through the transformations listed in
     docs/models/gated-deltanet.md, section "GGUF (llama.cpp's converter)", re-implemented here
     in numpy (not the converter's code); and the model metadata keys against the config.

The one thing patched: TextModel.get_vocab_base_pre. The converter identifies a BPE pre-tokenizer
by hashing the ids a tokenizer gives for a fixed text, and a 256-token vocabulary matches no known
hash, so the patch returns the real family's name instead ("qwen2" for Qwen3-Next, "qwen35" for
Qwen3.5 / Qwen3.5-MoE, what the hub GGUFs carry). Tensors and model metadata go through the
converter unchanged. Only the text model is written (the converter's default; the vision tower of
the composite checkpoints would go to a separate mmproj file with --mmproj, not made here).

Usage: python3 scripts/make_hybrid_gguf_fixtures.py LLAMA_CPP_DIR [ARCH ...]
  LLAMA_CPP_DIR: a llama.cpp checkout (only convert_hf_to_gguf.py and gguf-py/ are used); made with
  commit ec562eb673ab6fef464d0cf976bcb57925b5eff0. Needs torch, transformers, numpy, safetensors.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "arch"
ARCHS = ["qwen3_next", "qwen3_5", "qwen3_5_moe"]

# Split regexes as in the real tokenizer.json files (llama-vocab.cpp quotes them as "original regex").
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"
                r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
PRE = {"qwen3_next": ("qwen2", QWEN2_REGEX), "qwen3_5": ("qwen35", QWEN35_REGEX),
       "qwen3_5_moe": ("qwen35", QWEN35_REGEX)}
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def bytes_to_unicode() -> list[str]:
    """GPT-2's byte -> printable character map, indexed by byte value."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs))
    return [chr(table[b]) for b in range(256)]


def make_tokenizer(vocab_size: int, regex: str) -> tuple[dict, dict]:
    byte_tok = bytes_to_unicode()
    never_utf8 = {0xC0, 0xC1} | set(range(0xF5, 0x100))
    vocab = {byte_tok[b]: i for i, b in enumerate(b for b in range(256) if b not in never_utf8)}
    merges: list[list[str]] = []
    specials = SPECIALS
    n_merges = vocab_size - len(vocab) - len(specials)
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    pairs = [("Ġ", c) for c in letters] + [(a, b) for a in letters for b in letters]
    for a, b in pairs[:n_merges]:
        merges.append([a, b])
        vocab[a + b] = len(vocab)
    assert len(merges) == n_merges
    added = []
    for s in specials:
        added.append({"id": len(vocab), "content": s, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
        vocab[s] = len(vocab)
    assert len(vocab) == vocab_size
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
            byte_level]},
        "post_processor": byte_level, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": merges},
    }
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 262144,
           "clean_up_tokenization_spaces": False, "add_bos_token": False, "add_eos_token": False}
    return tok, cfg


BOOTSTRAP = r"""
import sys
llama_dir, pre, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
sys.path.insert(0, llama_dir)
import convert_hf_to_gguf as c
c.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
sys.argv = ["convert_hf_to_gguf.py"] + argv
c.main()
"""


def convert(llama_dir: Path, arch: str) -> Path:
    src = FIXTURES / arch
    cfg = json.loads((src / "config.json").read_text())
    vocab_size = cfg.get("text_config", cfg)["vocab_size"]
    pre, regex = PRE[arch]
    out = src / "model.gguf"
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / arch
        d.mkdir()
        for f in ["config.json", "generation_config.json", "model.safetensors"]:
            shutil.copy2(src / f, d / f)
        tok, tok_cfg = make_tokenizer(vocab_size, regex)
        (d / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False, indent=1))
        (d / "tokenizer_config.json").write_text(json.dumps(tok_cfg, indent=1))
        subprocess.run([sys.executable, "-c", BOOTSTRAP, str(llama_dir), pre, str(d),
                        "--outtype", "bf16", "--outfile", str(out)], check=True)
    return out


def expected_tensors(arch: str, cfg: dict, hf: dict) -> dict:
    """GGUF name -> (numpy array in row-major / torch order, ggml type name): the documented
    transformations of the Hugging Face tensors `hf` (float32, `language_model.` prefix removed)."""
    import numpy as np
    H = cfg["hidden_size"]
    nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    r = nv // nk
    tiled = arch != "qwen3_next"
    # GGUF value-head position p holds HF value head order[p]: p = j*nk + g <- m = g*r + j
    order = [g * r + j for j in range(r) for g in range(nk)] if tiled else list(range(nv))

    def heads(x, hd, axis=0):  # reorder value heads of size hd along axis
        x = np.moveaxis(x, axis, 0)
        x = x.reshape(nv, hd, *x.shape[1:])[order].reshape(nv * hd, *x.shape[1:])
        return np.moveaxis(x, 0, axis)

    out = {"token_embd.weight": (hf["model.embed_tokens.weight"], "BF16"),
           "output_norm.weight": (hf["model.norm.weight"] + 1, "F32")}
    if "lm_head.weight" in hf:
        out["output.weight"] = (hf["lm_head.weight"], "BF16")
    for i in range(cfg["num_hidden_layers"]):
        L, B = f"model.layers.{i}.", f"blk.{i}."
        out[B + "attn_norm.weight"] = (hf[L + "input_layernorm.weight"] + 1, "F32")
        out[B + "post_attention_norm.weight"] = (hf[L + "post_attention_layernorm.weight"] + 1, "F32")
        if L + "linear_attn.A_log" in hf:
            la = L + "linear_attn."
            out[B + "ssm_a"] = (-np.exp(hf[la + "A_log"][order]), "F32")
            out[B + "ssm_dt.bias"] = (hf[la + "dt_bias"][order], "F32")
            conv = hf[la + "conv1d.weight"][:, 0, :]
            out[B + "ssm_conv1d.weight"] = (np.concatenate([conv[:2 * nk * dk], heads(conv[2 * nk * dk:], dv)]), "F32")
            out[B + "ssm_norm.weight"] = (hf[la + "norm.weight"], "F32")
            out[B + "ssm_out.weight"] = (heads(hf[la + "out_proj.weight"], dv, axis=1), "BF16")
            if arch == "qwen3_next":
                w = hf[la + "in_proj_qkvz.weight"].reshape(nk, 2 * dk + 2 * r * dv, H)
                q, k = w[:, :dk], w[:, dk:2 * dk]
                v, z = w[:, 2 * dk:2 * dk + r * dv], w[:, 2 * dk + r * dv:]
                out[B + "attn_qkv.weight"] = (np.concatenate([x.reshape(-1, H) for x in (q, k, v)]), "BF16")
                out[B + "attn_gate.weight"] = (z.reshape(-1, H), "BF16")
                out[B + "ssm_ba.weight"] = (hf[la + "in_proj_ba.weight"], "BF16")
            else:
                qkv = hf[la + "in_proj_qkv.weight"]
                out[B + "attn_qkv.weight"] = (np.concatenate([qkv[:2 * nk * dk], heads(qkv[2 * nk * dk:], dv)]), "BF16")
                out[B + "attn_gate.weight"] = (heads(hf[la + "in_proj_z.weight"], dv), "BF16")
                out[B + "ssm_beta.weight"] = (hf[la + "in_proj_b.weight"][order], "BF16")
                out[B + "ssm_alpha.weight"] = (hf[la + "in_proj_a.weight"][order], "BF16")
        else:
            sa = L + "self_attn."
            for hfn, gn in [("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"), ("o_proj", "attn_output")]:
                out[B + gn + ".weight"] = (hf[sa + hfn + ".weight"], "BF16")
            out[B + "attn_q_norm.weight"] = (hf[sa + "q_norm.weight"] + 1, "F32")
            out[B + "attn_k_norm.weight"] = (hf[sa + "k_norm.weight"] + 1, "F32")
        m = L + "mlp."
        if m + "gate.weight" not in hf:
            for p in ["gate", "up", "down"]:
                out[B + f"ffn_{p}.weight"] = (hf[m + f"{p}_proj.weight"], "BF16")
            continue
        out[B + "ffn_gate_inp.weight"] = (hf[m + "gate.weight"], "F32")
        out[B + "ffn_gate_inp_shexp.weight"] = (hf[m + "shared_expert_gate.weight"], "F32")
        for p in ["gate", "up", "down"]:
            out[B + f"ffn_{p}_shexp.weight"] = (hf[m + f"shared_expert.{p}_proj.weight"], "BF16")
        if m + "experts.gate_up_proj" in hf:
            gu = hf[m + "experts.gate_up_proj"]
            n = gu.shape[1] // 2
            out[B + "ffn_gate_exps.weight"] = (gu[:, :n], "BF16")
            out[B + "ffn_up_exps.weight"] = (gu[:, n:], "BF16")
            out[B + "ffn_down_exps.weight"] = (hf[m + "experts.down_proj"], "BF16")
        else:
            for p in ["gate", "up", "down"]:
                stack = [hf[m + f"experts.{e}.{p}_proj.weight"] for e in range(cfg["num_experts"])]
                out[B + f"ffn_{p}_exps.weight"] = (np.stack(stack), "BF16")
    return out


def check(llama_dir: Path, arch: str, path: Path) -> None:
    import numpy as np
    import torch
    from safetensors.torch import load_file
    sys.path.insert(0, str(llama_dir / "gguf-py"))
    from gguf import GGUFReader

    src = FIXTURES / arch
    full = json.loads((src / "config.json").read_text())
    cfg = full.get("text_config", full)
    hf = {k.replace("language_model.", ""): v.float().numpy()
          for k, v in load_file(src / "model.safetensors").items() if "visual." not in k}
    want = expected_tensors(arch, cfg, hf)
    rd = GGUFReader(path)
    got = {t.name: t for t in rd.tensors}
    assert set(got) == set(want), (sorted(set(got) - set(want)), sorted(set(want) - set(got)))
    for name, (w, typ) in want.items():
        t = got[name]
        assert t.tensor_type.name == typ, (name, t.tensor_type.name, typ)
        assert [int(n) for n in t.shape] == list(reversed(w.shape)), (name, list(t.shape), w.shape)
        if typ == "BF16":
            g = (np.asarray(t.data).view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            g = np.asarray(t.data)
        g = g.reshape(w.shape)
        if name.endswith("ssm_a"):  # -exp in float32: the converter's torch.exp and numpy may differ by an ulp
            assert np.allclose(g, w, rtol=1e-6, atol=0), name
        else:
            assert np.array_equal(g, w), (name, float(np.abs(g - w).max()))

    kv = {k: f.contents() for k, f in rd.fields.items()}
    a = {"qwen3_next": "qwen3next", "qwen3_5": "qwen35", "qwen3_5_moe": "qwen35moe"}[arch]
    hd = cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    meta = {
        "general.architecture": a, "block_count": cfg["num_hidden_layers"],
        "context_length": cfg["max_position_embeddings"], "embedding_length": cfg["hidden_size"],
        "attention.head_count": cfg["num_attention_heads"], "attention.head_count_kv": cfg["num_key_value_heads"],
        "attention.key_length": hd, "attention.value_length": hd,
        "rope.dimension_count": int(hd * 0.25), "full_attention_interval": cfg["full_attention_interval"],
        "ssm.conv_kernel": cfg["linear_conv_kernel_dim"], "ssm.state_size": cfg["linear_key_head_dim"],
        "ssm.group_count": cfg["linear_num_key_heads"], "ssm.time_step_rank": cfg["linear_num_value_heads"],
        "ssm.inner_size": cfg["linear_value_head_dim"] * cfg["linear_num_value_heads"],
    }
    if "intermediate_size" in cfg:
        meta["feed_forward_length"] = cfg["intermediate_size"]
    if "num_experts" in cfg:
        meta.update({"expert_count": cfg["num_experts"], "expert_used_count": cfg["num_experts_per_tok"],
                     "expert_feed_forward_length": cfg["moe_intermediate_size"],
                     "expert_shared_feed_forward_length": cfg["shared_expert_intermediate_size"]})
    if "rope_parameters" in cfg:
        meta["rope.dimension_sections"] = (cfg["rope_parameters"]["mrope_section"] + [0, 0, 0, 0])[:4]
    for k, v in meta.items():
        key = k if k.startswith("general.") else f"{a}.{k}"
        assert kv.get(key) == v, (key, kv.get(key), v)
    assert abs(kv[f"{a}.rope.freq_base"] - 1e7) < 1 and abs(kv[f"{a}.attention.layer_norm_rms_epsilon"] - 1e-6) < 1e-12
    assert kv["tokenizer.ggml.tokens"] and len(kv["tokenizer.ggml.tokens"]) == cfg["vocab_size"]
    print(f"{path}: {len(want)} tensors and {len(meta)} metadata keys as documented")


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    llama_dir = Path(sys.argv[1]).resolve()
    assert (llama_dir / "convert_hf_to_gguf.py").is_file(), f"no convert_hf_to_gguf.py in {llama_dir}"
    for arch in sys.argv[2:] or ARCHS:
        out = convert(llama_dir, arch)
        print(f"{out}: {out.stat().st_size} bytes")
        check(llama_dir, arch, out)


if __name__ == "__main__":
    main()
