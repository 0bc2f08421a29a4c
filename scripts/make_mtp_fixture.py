"""Gives the qwen3_5 fixture (fixtures/arch/qwen3_5, made by make_arch_fixtures.py) a random
multi-token-prediction (MTP) layer under the names Qwen3.5 checkpoints use (mtp.fc,
mtp.pre_fc_norm_embedding, mtp.pre_fc_norm_hidden, mtp.layers.0.*, mtp.norm), in a second
safetensors file that a model.safetensors.index.json names beside the first, as a sharded
checkpoint does (transformers ignores the mtp.* tensors when it loads the model); and writes
mtp_reference.json: the MTP layer's log-probabilities, computed in float32 by transformers'
own Qwen3.5 modules on the same (bfloat16-rounded) weights.

The head, for each position p of a sequence: u = fc([pre_fc_norm_embedding(embed(x[p+1]));
pre_fc_norm_hidden(h[p])]) with h the text model's last hidden state (after its final norm);
a full-attention decoder layer over u at position p, causal over the MTP's own positions;
o = norm(layer(u)); logits = lm_head(o), scoring x[p+2]. That is vLLM's and SGLang's reading
of these checkpoints.

Run with the fixture venv: python scripts/make_mtp_fixture.py
"""

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM
from transformers.masking_utils import create_causal_mask
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer, Qwen3_5RMSNorm

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "arch" / "qwen3_5"
MTP_FILE = "model-mtp.safetensors"
SEED = 5353


def random_mtp(cfg):
    """The MTP tensors, float32 values already rounded to bfloat16."""
    torch.manual_seed(SEED)
    full = [i for i, t in enumerate(cfg.layer_types) if t == "full_attention"][-1]
    layer = Qwen3_5DecoderLayer(cfg, layer_idx=full)
    hidden = cfg.hidden_size
    tensors = {}
    for name, p in layer.state_dict().items():
        if name.endswith("norm.weight"):
            # Zero-centred norms ((1 + w) scales): small w around 0.
            value = 0.1 * torch.randn(p.shape)
        else:
            value = torch.randn(p.shape) / p.shape[-1] ** 0.5
        tensors[f"mtp.layers.0.{name}"] = value
    tensors["mtp.fc.weight"] = torch.randn(hidden, 2 * hidden) / (2 * hidden) ** 0.5
    for norm in ["pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"]:
        tensors[f"mtp.{norm}.weight"] = 0.1 * torch.randn(hidden)
    return full, {k: v.to(torch.bfloat16).float() for k, v in tensors.items()}


@torch.no_grad()
def mtp_logprobs(model, full, tensors, ids):
    """Log-probabilities of the MTP layer at each position p of `ids` (for p + 2 < len)."""
    cfg = model.config
    text = model.model
    layer = Qwen3_5DecoderLayer(cfg, layer_idx=full)
    layer.load_state_dict(
        {k[len("mtp.layers.0."):]: v for k, v in tensors.items() if k.startswith("mtp.layers.0.")}
    )
    layer.eval()
    norms = {}
    for name in ["pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"]:
        n = Qwen3_5RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
        n.weight.copy_(tensors[f"mtp.{name}.weight"])
        norms[name] = n
    x = torch.tensor([ids])
    h = text(input_ids=x, use_cache=False).last_hidden_state  # after the final norm
    n = len(ids) - 1  # pairs (x[p+1], h[p]) for p = 0..n-1
    e = text.embed_tokens(x[:, 1:])
    u = torch.cat([norms["pre_fc_norm_embedding"](e), norms["pre_fc_norm_hidden"](h[:, :n])], dim=-1)
    u = u @ tensors["mtp.fc.weight"].T
    positions = torch.arange(n).view(1, 1, -1).expand(4, 1, -1)
    text_positions, rope_positions = positions[0], positions[1:]
    mask = create_causal_mask(
        config=cfg, inputs_embeds=u, attention_mask=None, cache=None, position_ids=text_positions
    )
    pe = text.rotary_emb(u, rope_positions)
    o = layer(u, position_embeddings=pe, attention_mask=mask, position_ids=text_positions)
    logits = model.lm_head(norms["norm"](o))[0].double()
    lp = torch.log_softmax(logits, dim=-1)
    # Row p scores x[p + 2].
    return [float(lp[p, ids[p + 2]]) for p in range(n - 1)], [int(t) for t in lp.argmax(-1)]


def main():
    model = AutoModelForCausalLM.from_pretrained(
        FIXTURE, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    full, tensors = random_mtp(model.config)
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in tensors.items()}, FIXTURE / MTP_FILE)
    weight_map = {}
    with safe_open(FIXTURE / "model.safetensors", "pt") as f:
        for name in f.keys():
            weight_map[name] = "model.safetensors"
    for name in tensors:
        weight_map[name] = MTP_FILE
    index = {"metadata": {}, "weight_map": dict(sorted(weight_map.items()))}
    (FIXTURE / "model.safetensors.index.json").write_text(json.dumps(index, indent=1) + "\n")

    reference = json.loads((FIXTURE / "reference.json").read_text())
    cases = []
    for prompt in reference["prompts"][:3]:
        ids = list(prompt["ids"]) + list(prompt["greedy"])
        logprobs, argmax = mtp_logprobs(model, full, tensors, ids)
        cases.append({"ids": ids, "mtp_logprobs": logprobs, "mtp_argmax": argmax})
    out = {
        "note": "the MTP layer's log-probability of ids[p + 2] at each position p (pair "
        "(ids[p + 1], final hidden state at p)), and its argmax at every p; transformers "
        "float32 modules on the bfloat16 weights of model-mtp.safetensors",
        "transformers_version": __import__("transformers").__version__,
        "cases": cases,
    }
    (FIXTURE / "mtp_reference.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"{len(tensors)} MTP tensors; {len(cases)} reference cases")


if __name__ == "__main__":
    main()
