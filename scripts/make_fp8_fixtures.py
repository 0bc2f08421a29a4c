#!/usr/bin/env python3
"""FP8 checkpoints of two fixtures/arch models, with transformers as the oracle.

  qwen3_fp8  fixtures/arch/qwen3's weights in Hugging Face's `fp8` layout: every linear layer of
             the decoder as float8_e4m3fn with block scales `weight_scale_inv` of 16 x 32 blocks
             (real checkpoints use 128 x 128; the tiny model needs smaller blocks to have several)
  llama_fp8  fixtures/arch/llama's in compressed-tensors' float-quantized layout: per-output-channel
             scales `weight_scale` [rows, 1], lm_head left in bf16 (its `ignore` list)

The scales are amax / 448 of each block or row, as the FP8 quantizers of both formats compute them.
reference.json: transformers in float32 (eager attention) on the DEQUANTIZED weights (fp8 value x
scale, in float32), on the base fixture's prompts, in make_arch_fixtures.py's format. So the
oracle is independent of ferrite's FP8 reader: it never sees the FP8 file.

Usage: python3 scripts/make_fp8_fixtures.py      (needs torch, transformers, safetensors)
"""
import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_arch_fixtures as m  # noqa: E402

LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
FP8_MAX = 448.0
VARIANTS = {
    "qwen3_fp8": {"base": "qwen3", "block": [16, 32]},
    "llama_fp8": {"base": "llama", "block": None},
}


def quantize(w, block):
    """(fp8 tensor, scale, dequantized float32) of a float32 matrix."""
    rows, cols = w.shape
    if block is None:
        scale = (w.abs().amax(dim=1, keepdim=True) / FP8_MAX).clamp(min=1e-12)
        full = scale.expand(rows, cols)
    else:
        br, bc = block
        sr, sc = -(-rows // br), -(-cols // bc)
        scale = torch.empty(sr, sc)
        for i in range(sr):
            for j in range(sc):
                scale[i, j] = w[i * br:(i + 1) * br, j * bc:(j + 1) * bc].abs().amax() / FP8_MAX
        scale = scale.clamp(min=1e-12)
        full = scale.repeat_interleave(br, 0)[:rows].repeat_interleave(bc, 1)[:, :cols]
    q = (w / full).to(torch.float8_e4m3fn)
    return q, scale.float(), q.float() * full


def quantization_config(block):
    if block is not None:
        return {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                "weight_block_size": block}
    return {"quant_method": "compressed-tensors", "format": "float-quantized",
            "ignore": ["lm_head"], "quantization_status": "compressed",
            "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None,
                                          "weights": {"num_bits": 8, "type": "float",
                                                      "strategy": "channel", "symmetric": True,
                                                      "dynamic": False}}}}


def make(name, base, block):
    src, d = m.OUT / base, m.OUT / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    shutil.copy(src / "generation_config.json", d)
    tensors = load_file(src / "model.safetensors")
    out, dequantized = {}, {}
    for key, t in tensors.items():
        module = key.rsplit(".", 2)[-2] if key.count(".") >= 2 else ""
        if key.startswith("model.layers.") and key.endswith(".weight") and module in LINEAR:
            q, scale, deq = quantize(t.float(), block)
            out[key] = q
            out[key + ("_scale_inv" if block is not None else "_scale")] = scale
            dequantized[key] = deq
        else:
            out[key] = t
    save_file(out, d / "model.safetensors", metadata={"format": "pt"})
    cfg = json.loads((src / "config.json").read_text())
    cfg["quantization_config"] = quantization_config(block)
    m.write_json(d / "config.json", cfg)

    model = m.load_f32(src)
    params = dict(model.named_parameters())
    for key, deq in dequantized.items():
        with torch.no_grad():
            params[key].copy_(deq)
    base_ref = json.loads((src / "reference.json").read_text())
    prompts = [m.reference_for(model, p["ids"]) for p in base_ref["prompts"]]
    ref = dict(base_ref)
    ref.update({
        "arch": name,
        "dtype_of_weights": "float8_e4m3fn linear layers, the rest bfloat16",
        "note": base_ref["note"] + "; the reference runs on the dequantized FP8 weights "
        "(fp8 x scale in float32), not on the FP8 file",
        "prompts": prompts,
    })
    m.write_json(d / "reference.json", ref)
    safe = [m.leading_safe_steps(p) for p in prompts]
    print(f"{name}: {len(dequantized)} FP8 matrices, greedy steps above the margin per prompt: {safe}")


def main():
    for name, v in VARIANTS.items():
        make(name, v["base"], v["block"])


if __name__ == "__main__":
    main()
