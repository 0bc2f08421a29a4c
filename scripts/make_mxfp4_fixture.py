"""fixtures/arch/gpt_oss_mxfp4: the gpt_oss fixture with its experts in MXFP4, laid out as the
released gpt-oss checkpoints are (`quantization_config: mxfp4`; `*_blocks` u8 [E, rows, groups,
16] with elements 2k / 2k+1 in the low / high nibble of byte k, `*_scales` u8 [E, rows, groups]
E8M0 exponents; the experts in [E, out, in] orientation, gate and up rows interleaved), and the
reference of transformers' own MXFP4 dequantization (`Mxfp4Config(dequantize=True)`, the path
it takes on a CPU) run in float32.

    /work/venv-fixtures/bin/python scripts/make_mxfp4_fixture.py     (after make_arch_fixtures.py gpt_oss)

The quantizer is this script's own (any valid MXFP4 encoding will do: the reference is whatever
the blocks decode to): per group of 32, the exponent makes the largest magnitude fit 6, each
value rounds to the nearest E2M1 code.
"""
import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, Mxfp4Config

import make_arch_fixtures as fx

SRC = fx.OUT / "gpt_oss"
DST = fx.OUT / "gpt_oss_mxfp4"
E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def quantize(w):
    """w [E, rows, cols] (float) -> blocks u8 [E, rows, cols/32, 16], scales u8 [E, rows, cols/32]."""
    E, rows, cols = w.shape
    g = w.float().reshape(E, rows, cols // 32, 32)
    amax = g.abs().amax(-1)
    exp = torch.where(amax > 0, torch.ceil(torch.log2(amax / 6.0)), torch.full_like(amax, -127.0))
    exp = exp.clamp(-127, 127)
    scaled = g / torch.pow(2.0, exp)[..., None]
    codes = (scaled[..., None] - E2M1).abs().argmin(-1).to(torch.uint8)  # nearest code
    blocks = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return blocks.contiguous(), (exp + 127).to(torch.uint8).contiguous()


def main():
    if DST.exists():
        shutil.rmtree(DST)
    DST.mkdir(parents=True)
    tensors = load_file(SRC / "model.safetensors")
    out = {}
    for name, t in tensors.items():
        if name.endswith("mlp.experts.gate_up_proj") or name.endswith("mlp.experts.down_proj"):
            # transformers' float layout is [E, in, out]; MXFP4 checkpoints hold [E, out, in]
            blocks, scales = quantize(t.transpose(1, 2))
            out[name + "_blocks"], out[name + "_scales"] = blocks, scales
        else:
            out[name] = t
    save_file(out, DST / "model.safetensors", metadata={"format": "pt"})
    cfg = json.loads((SRC / "config.json").read_text())
    cfg["quantization_config"] = {
        "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                   "model.embed_tokens", "lm_head"],
        "quant_method": "mxfp4",
    }
    fx.write_json(DST / "config.json", cfg)
    shutil.copy(SRC / "generation_config.json", DST / "generation_config.json")

    model = AutoModelForCausalLM.from_pretrained(
        DST, quantization_config=Mxfp4Config(dequantize=True), dtype=torch.float32,
        attn_implementation="eager").eval()
    # the dequantized experts are what the blocks say (and not the float fixture's)
    ref_src = json.loads((SRC / "reference.json").read_text())
    prompts = [fx.reference_for(model, p["ids"]) for p in ref_src["prompts"]]
    float_model = fx.load_f32(SRC)
    moved = fx.max_lp_diff(model, float_model, prompts[-1]["ids"])
    print(f"gpt_oss_mxfp4: MXFP4 experts vs the bf16 ones: max |dlogprob| {moved:.3f}")
    assert moved > 1e-3
    low = [min(p["greedy_margins"]) for p in prompts]
    print(f"gpt_oss_mxfp4: least greedy margin per prompt {[round(x, 3) for x in low]}")
    ref = dict(ref_src, arch="gpt_oss_mxfp4", prompts=prompts,
               note=ref_src["note"] + "; experts MXFP4, dequantized by transformers' Mxfp4Config(dequantize=True)")
    fx.write_json(DST / "reference.json", ref)


if __name__ == "__main__":
    main()
