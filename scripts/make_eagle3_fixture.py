"""Makes two random EAGLE-3 heads for the llama fixture (fixtures/arch/llama, made by
make_arch_fixtures.py), one in each layout heads are published in, and writes reference.json:
the heads' draft log-probabilities computed in float32 by a PyTorch implementation of the
architecture written here from its description (vLLM's and SGLang's reading of these
checkpoints), on the same bfloat16-rounded weights. Independent of ferrite.

The head, for the pair (token x[p+1], the target at position p):
  g     = fc([a_1(p); a_2(p); a_3(p)])      a_i: the target's residual stream at the input of
                                            its layer aux[i] (transformers' hidden_states[aux[i]])
  in    = [input_layernorm(embed(x[p+1])); hidden_norm(g)]    (2 * hidden wide)
  h     = r + o_proj(attention(in))          r = g, or hidden_norm(g) (norm_before_residual);
                                            q, k, v read `in`; RoPE of the head's own config at
                                            position p; causal over the head's own positions
  h2    = h + mlp(post_attention_layernorm(h))
  logits over the draft vocabulary = lm_head(norm(h2)); draft id i is target id i + d2t[i]
A second draft step at p + 1 reads (the first step's argmax as a target id, h2) -- norm(h2)
under speculators' norm_output -- and attends over the first steps' K/V at 0..p.

Heads (fixtures/eagle3/):
  llama_eagle/        EAGLE / SpecForge layout: midlayer.*, LlamaForCausalLMEagle3, d2t (int64)
                      and t2d (bool), no embedding (the target's), eagle_config's layer ids
                      [0, 2, 3] (layer outputs: the inputs of layers 1, 3, 4).
  llama_speculators/  speculators layout: layers.0.*, transformer_layer_config, its own
                      embed_tokens, eagle_aux_hidden_state_layer_ids [1, 3, 4] (layer inputs),
                      norm_before_residual and norm_output true.
Both have a 256-id draft vocabulary and RoPE theta 10000 without scaling (the target's is
500000 with llama3 scaling): the head's own RoPE is exercised.

Run with the fixture venv: python scripts/make_eagle3_fixture.py
"""

import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, LlamaConfig
from transformers.models.llama.modeling_llama import (
    LlamaMLP,
    LlamaRMSNorm,
    LlamaRotaryEmbedding,
    apply_rotary_pos_emb,
)

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "fixtures" / "arch" / "llama"
OUT = ROOT / "fixtures" / "eagle3"
DRAFT_VOCAB = 256
AUX_INPUTS = [1, 3, 4]


def head_config(target):
    c = json.loads((TARGET / "config.json").read_text())
    c.update(num_hidden_layers=1, rope_theta=10000.0, max_position_embeddings=2048)
    c.pop("rope_scaling", None)
    c.pop("transformers_version", None)
    return c


def random_head(target_cfg, seed, own_embedding):
    """The head's tensors under EAGLE names (midlayer.*), values rounded to bfloat16."""
    g = torch.Generator().manual_seed(seed)
    hidden, heads, kv_heads, hd = 64, 4, 2, 16
    inter, vocab = target_cfg.intermediate_size, target_cfg.vocab_size

    def m(rows, cols):
        return torch.randn(rows, cols, generator=g) / cols**0.5

    def n():
        return 1.0 + 0.1 * torch.randn(hidden, generator=g)

    t = {
        "fc.weight": m(hidden, 3 * hidden),
        "midlayer.hidden_norm.weight": n(),
        "midlayer.input_layernorm.weight": n(),
        "midlayer.self_attn.q_proj.weight": m(heads * hd, 2 * hidden),
        "midlayer.self_attn.k_proj.weight": m(kv_heads * hd, 2 * hidden),
        "midlayer.self_attn.v_proj.weight": m(kv_heads * hd, 2 * hidden),
        "midlayer.self_attn.o_proj.weight": m(hidden, heads * hd),
        "midlayer.post_attention_layernorm.weight": n(),
        "midlayer.mlp.gate_proj.weight": m(inter, hidden),
        "midlayer.mlp.up_proj.weight": m(inter, hidden),
        "midlayer.mlp.down_proj.weight": m(hidden, inter),
        "norm.weight": n(),
        "lm_head.weight": 4 * m(DRAFT_VOCAB, hidden),
    }
    if own_embedding:
        t["embed_tokens.weight"] = torch.randn(vocab, hidden, generator=g)
    ids = torch.randperm(vocab, generator=g)[:DRAFT_VOCAB].sort().values
    t = {k: v.to(torch.bfloat16).float() for k, v in t.items()}
    d2t = ids - torch.arange(DRAFT_VOCAB)
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[ids] = True
    return t, d2t, t2d


class Head:
    """The architecture above, in float32, from the tensors of `random_head`."""

    def __init__(self, cfg, t, d2t, embed, residual_normed, feed_normed):
        self.cfg, self.t = cfg, t
        self.target_ids = torch.arange(DRAFT_VOCAB) + d2t
        self.embed = embed
        self.residual_normed, self.feed_normed = residual_normed, feed_normed
        eps = cfg.rms_norm_eps
        self.norms = {}
        for name in ["hidden_norm", "input_layernorm", "post_attention_layernorm"]:
            self.norms[name] = LlamaRMSNorm(cfg.hidden_size, eps=eps)
            self.norms[name].weight.data = t[f"midlayer.{name}.weight"]
        self.norms["norm"] = LlamaRMSNorm(cfg.hidden_size, eps=eps)
        self.norms["norm"].weight.data = t["norm.weight"]
        self.mlp = LlamaMLP(cfg)
        for p in ["gate_proj", "up_proj", "down_proj"]:
            getattr(self.mlp, p).weight.data = t[f"midlayer.mlp.{p}.weight"]
        self.rope = LlamaRotaryEmbedding(cfg)

    def layer(self, tokens, g, positions):
        """Rows (token, g) at `positions`, causal over themselves: (h2, draft logits)."""
        t, cfg = self.t, self.cfg
        heads, kv_heads, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        e = self.embed[tokens]
        x = torch.cat([self.norms["input_layernorm"](e), self.norms["hidden_norm"](g)], -1)
        r = self.norms["hidden_norm"](g) if self.residual_normed else g
        n = len(tokens)
        q = (x @ t["midlayer.self_attn.q_proj.weight"].T).view(1, n, heads, hd).transpose(1, 2)
        k = (x @ t["midlayer.self_attn.k_proj.weight"].T).view(1, n, kv_heads, hd).transpose(1, 2)
        v = (x @ t["midlayer.self_attn.v_proj.weight"].T).view(1, n, kv_heads, hd).transpose(1, 2)
        cos, sin = self.rope(x[None], torch.tensor([positions]))
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        k = k.repeat_interleave(heads // kv_heads, dim=1)
        v = v.repeat_interleave(heads // kv_heads, dim=1)
        scores = q @ k.transpose(-1, -2) * hd**-0.5
        scores = scores + torch.full((n, n), float("-inf")).triu(1)
        o = (scores.softmax(-1) @ v).transpose(1, 2).reshape(n, heads * hd)
        h = r + o @ t["midlayer.self_attn.o_proj.weight"].T
        h2 = h + self.mlp(self.norms["post_attention_layernorm"](h))
        normed = self.norms["norm"](h2)
        logits = normed @ t["lm_head.weight"].T
        return (normed if self.feed_normed else h2), logits


@torch.no_grad()
def reference_case(model, head, ids):
    """Per position p: the first draft step's log-probabilities over the draft vocabulary,
    and the second step's (from the first's argmax)."""
    x = torch.tensor([ids])
    hs = model(input_ids=x, output_hidden_states=True).hidden_states
    aux = torch.cat([hs[i][0] for i in AUX_INPUTS], -1)
    n = len(ids) - 1  # pairs (x[p+1], h[p]) for p = 0..n-1
    g = aux[:n] @ head.t["fc.weight"].T
    tokens = torch.tensor(ids[1:])
    fed, logits = head.layer(tokens, g, list(range(n)))
    first = torch.log_softmax(logits.double(), -1)
    second = []
    for p in range(n):
        best = int(head.target_ids[first[p].argmax()])
        rows_t = torch.cat([tokens[: p + 1], torch.tensor([best])])
        rows_g = torch.cat([g[: p + 1], fed[p : p + 1]])
        _, l2 = head.layer(rows_t, rows_g, list(range(p + 2)))
        second.append(torch.log_softmax(l2[-1].double(), -1))
    return {
        "ids": ids,
        "first": [[round(float(v), 6) for v in row] for row in first],
        "second": [[round(float(v), 6) for v in row] for row in second],
    }


def save(name, tensors, d2t, t2d, config):
    d = OUT / name
    d.mkdir(parents=True, exist_ok=True)
    out = {k: v.to(torch.bfloat16).contiguous() for k, v in tensors.items()}
    out["d2t"] = d2t.to(torch.int64).contiguous()
    out["t2d"] = t2d.contiguous()
    save_file(out, d / "model.safetensors")
    (d / "config.json").write_text(json.dumps(config, indent=1) + "\n")


def main():
    model = AutoModelForCausalLM.from_pretrained(
        TARGET, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    base = head_config(model.config)
    cfg = LlamaConfig(**base)
    reference = json.loads((TARGET / "reference.json").read_text())
    prompts = [list(p["ids"])[:40] + list(p["greedy"][:8]) for p in reference["prompts"][:2]]
    out = {"note": __doc__.split("\n\n")[0], "heads": {}}

    # EAGLE / SpecForge layout.
    t, d2t, t2d = random_head(model.config, 3131, own_embedding=False)
    eagle = dict(base, architectures=["LlamaForCausalLMEagle3"], draft_vocab_size=DRAFT_VOCAB)
    eagle["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": [i - 1 for i in AUX_INPUTS]}
    save("llama_eagle", t, d2t, t2d, eagle)
    embed = model.model.embed_tokens.weight
    head = Head(cfg, t, d2t, embed, residual_normed=False, feed_normed=False)
    out["heads"]["llama_eagle"] = {
        "draft_to_target": head.target_ids.tolist(),
        "cases": [reference_case(model, head, ids) for ids in prompts],
    }

    # speculators layout.
    t, d2t, t2d = random_head(model.config, 4242, own_embedding=True)
    renamed = {k.replace("midlayer.", "layers.0."): v for k, v in t.items()}
    speculators = {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "transformer_layer_config": dict(base, architectures=["LlamaForCausalLM"]),
        "draft_vocab_size": DRAFT_VOCAB,
        "eagle_aux_hidden_state_layer_ids": AUX_INPUTS,
        "norm_before_residual": True,
        "norm_output": True,
        "speculators_config": {
            "algorithm": "eagle3",
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
            "default_proposal_method": "greedy",
            "verifier": {"name_or_path": "fixtures/arch/llama", "architectures": ["LlamaForCausalLM"]},
        },
    }
    save("llama_speculators", renamed, d2t, t2d, speculators)
    head = Head(cfg, t, d2t, t["embed_tokens.weight"], residual_normed=True, feed_normed=True)
    out["heads"]["llama_speculators"] = {
        "draft_to_target": head.target_ids.tolist(),
        "cases": [reference_case(model, head, ids) for ids in prompts],
    }
    out["transformers_version"] = __import__("transformers").__version__
    (OUT / "reference.json").write_text(json.dumps(out) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
