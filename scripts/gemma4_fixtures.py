"""Gemma 4 text fixtures for make_arch_fixtures.py (issue 38, part 3): the configs, the parts of
the random weights that differ from the other families, and the feature checks.

Gemma 4's text model (transformers 5.25, models/gemma4/modeling_gemma4.py):
  - sliding and full ("global") attention layers; global layers have their own head size
    (`global_head_dim`) and, with `attention_k_eq_v`, their own KV head count
    (`num_global_key_value_heads`) and no v_proj (the values are the keys' projection);
  - RoPE per layer type: sliding layers plain over the whole head (theta 1e4), global layers
    "proportional" (theta 1e6, the first partial_rotary_factor * head_dim / 2 frequency pairs of the
    rotate-half layout turn, at base^(-2i/head_dim), the rest do not);
  - RMSNorms scale by w (not 1 + w); q_norm and k_norm per head, v_norm per head without a weight;
    attention scores unscaled (scaling 1.0);
  - per-layer inputs (PLE): a second embedding table [vocab, layers * width] and a projection of the
    (scaled) embedding, combined per layer and fed through a gate after the MLP;
  - the last `num_kv_shared_layers` layers have no K/V projections: they read the K/V of the last
    earlier layer of their type; with `use_double_wide_mlp` their MLP is twice as wide;
  - a `layer_scalar` buffer per layer multiplies the layer's output;
  - final logits softcapped (tanh, 30);
  - 26B-A4B: every layer runs its dense MLP and, beside it, a mixture of experts with its own
    norms and a router on rms_norm(x) * scale / sqrt(hidden), renormalised top-k, per-expert scales.
"""
import copy

import torch

# google/gemma-4-E2B's text_config scaled down (Gemma4ForCausalLM / gemma4_text, the text-only
# class; the hub's Gemma4ForConditionalGeneration wraps the same config in text_config). Kept:
# sliding layers with plain rope (theta 1e4) and global ones with a head twice as wide
# (global_head_dim 32 here, 512 released, vs head_dim 16 / 256) and proportional rope (factor 0.25,
# theta 1e6); per-layer inputs (hidden_size_per_layer_input 16 here, 256 released; the per-layer
# vocabulary = the vocabulary, as released); KV shared by the last layers (3 of 6 here, 20 of 35 in
# E2B) with the double-wide MLP on them (E2B: use_double_wide_mlp true); final softcap 30; tied
# embeddings; GeGLU (gelu_pytorch_tanh); rms_norm_eps 1e-6. Changed: 6 layers in a 2:1 pattern
# (released 4:1 in E2B, 5:1 in the others) so that both a sliding and a global layer share KV;
# sliding_window 8 (512) so that every prompt outgrows it; 4 heads / 2 KV heads (E2B 8 / 1);
# attention_k_eq_v true with num_global_key_value_heads 1, which E2B does not have (it is 31B's and
# 26B-A4B's global attention) so that one fixture covers every attention feature. Released values
# I am not sure of (guesses from memory of the hub configs): E2B's layer pattern and its 20 shared
# layers.
GEMMA4 = {
    "architectures": ["Gemma4ForCausalLM"],
    "model_type": "gemma4_text",
    "attention_bias": False,
    "attention_dropout": 0.0,
    "attention_k_eq_v": True,
    "bos_token_id": 2,
    "enable_moe_block": False,
    "eos_token_id": 1,
    "final_logit_softcapping": 30.0,
    "global_head_dim": 32,
    "head_dim": 16,
    "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": 64,
    "hidden_size_per_layer_input": 16,
    "initializer_range": 0.02,
    "intermediate_size": 64,
    "layer_types": ["sliding_attention", "sliding_attention", "full_attention"] * 2,
    "max_position_embeddings": 131072,
    "moe_intermediate_size": None,
    "num_attention_heads": 4,
    "num_experts": None,
    "num_global_key_value_heads": 1,
    "num_hidden_layers": 6,
    "num_key_value_heads": 2,
    "num_kv_shared_layers": 3,
    "pad_token_id": 0,
    "rms_norm_eps": 1e-06,
    "rope_parameters": {
        "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
        "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"},
    },
    "sliding_window": 8,
    "tie_word_embeddings": True,
    "top_k_experts": None,
    "use_bidirectional_attention": None,
    "use_cache": True,
    "use_double_wide_mlp": True,
    "vocab_size": 256,
    "vocab_size_per_layer_input": 256,
}

# google/gemma-4-26B-A4B's text_config scaled down: every layer a dense GeGLU MLP plus, beside it,
# 8 experts (128 released) top-2 (8) of width 32 (moe_intermediate_size 704), dense width 32 (2112);
# global layers with attention_k_eq_v, num_global_key_value_heads 1 (2) and global_head_dim 32
# (512) vs head_dim 16 (256); proportional rope 0.25 on global layers; no per-layer inputs
# (hidden_size_per_layer_input 0) and no KV sharing, as released; softcap 30; 4 layers
# [sliding x3, full] (30 layers, 5:1 released), window 8 (1024), 4 heads / 2 KV heads (16 / 8).
GEMMA4_MOE = dict(
    GEMMA4,
    attention_k_eq_v=True,
    enable_moe_block=True,
    hidden_size_per_layer_input=0,
    intermediate_size=32,
    layer_types=["sliding_attention"] * 3 + ["full_attention"],
    moe_intermediate_size=32,
    num_experts=8,
    num_hidden_layers=4,
    num_kv_shared_layers=0,
    top_k_experts=2,
    use_double_wide_mlp=False,
)

# 26B-A4B as the hub ships it: the composite Gemma4ForConditionalGeneration (model_type gemma4,
# the text model in text_config, weights under model.language_model.); the vision and audio towers
# are left out here (vision_config / audio_config null, which transformers allows), so the
# checkpoint holds the text model alone under the composite's names.
GEMMA4_MOE_COMPOSITE = {
    "architectures": ["Gemma4ForConditionalGeneration"],
    "model_type": "gemma4",
    "audio_config": None,
    "text_config": dict(GEMMA4_MOE, model_type="gemma4_text", architectures=None),
    "tie_word_embeddings": True,
    "vision_config": None,
}
del GEMMA4_MOE_COMPOSITE["text_config"]["architectures"]

CONFIGS = {"gemma4": GEMMA4, "gemma4_moe": GEMMA4_MOE_COMPOSITE}
COMPOSITE = ("gemma4_moe",)
GENERATION = {
    "gemma4": {"bos_token_id": 2, "eos_token_id": [1, 106], "pad_token_id": 0},
    "gemma4_moe": {"bos_token_id": 2, "eos_token_id": [1, 106], "pad_token_id": 0},
}
SEEDS = {"gemma4": 114, "gemma4_moe": 115}
ROUTER_SCALE = 2.0


def is_gemma4(arch):
    return arch in CONFIGS


def text_model(model):
    """The text model of a Gemma4ForCausalLM or a Gemma4ForConditionalGeneration."""
    return getattr(model.model, "language_model", model.model)


def param_value(arch, name, shape, g, hidden):
    """The random value of a Gemma 4 parameter the generic rules do not cover, else None."""
    if not is_gemma4(arch):
        return None
    if name.endswith("embed_tokens_per_layer.weight"):
        return torch.randn(shape, generator=g)  # an embedding: O(1) entries
    if name.endswith(("layernorm_1.weight", "layernorm_2.weight")):
        return 1.0 + 0.15 * torch.randn(shape, generator=g)  # norms beside the experts: scale w
    if name.endswith("router.scale"):
        return 1.0 + 0.15 * torch.randn(shape, generator=g)
    if name.endswith("router.per_expert_scale"):
        return torch.empty(shape).uniform_(0.5, 1.5, generator=g)
    if name.endswith("router.proj.weight"):
        # the router's input is rms_norm(x) / sqrt(hidden): O(1/sqrt(hidden)) entries
        return ROUTER_SCALE * torch.randn(shape, generator=g) * hidden**0.5 / shape[-1] ** 0.5
    return None


@torch.no_grad()
def randomize_buffers(model, arch, seed):
    """layer_scalar is a (persistent) buffer: random per layer, so that dropping it is caught."""
    if not is_gemma4(arch):
        return
    g = torch.Generator().manual_seed(seed + 7)
    for name, b in model.named_buffers():
        if name.endswith("layer_scalar"):
            b.copy_(torch.empty(b.shape).uniform_(0.5, 1.5, generator=g).to(b.dtype))


def check_features(arch, d, base, ids, load_f32, max_lp_diff):
    """Each Gemma 4 feature the fixture carries moves the reference, so an engine that drops or
    misreads it fails the parity test."""
    cfg = base.config.get_text_config()
    lt = cfg.layer_types
    layers = text_model(base).layers
    print(f"  {arch}: layer_types {lt}")
    W = cfg.sliding_window
    wide = load_f32(d, sliding_window=4096)
    print(f"  {arch}: window {W} vs 4096: max |dlogprob| positions >= {W}: {max_lp_diff(base, wide, ids, start=W):.3f}")
    assert max_lp_diff(base, wide, ids, start=W) > 0.1
    glob = [i for i, t in enumerate(lt) if t == "full_attention"]
    heads = [(m.self_attn.head_dim, m.self_attn.config.per_layer_config[i].num_key_value_heads) for i, m in enumerate(layers)]
    print(f"  {arch}: (head_dim, kv heads) per layer {heads}")
    assert heads[glob[0]] == (cfg.per_layer_config[glob[0]].head_dim, 1) and heads[0][0] != heads[glob[0]][0]
    inv = text_model(base).rotary_emb.full_attention_inv_freq
    print(f"  {arch}: global inv_freq {[f'{x:.3g}' for x in inv.tolist()]}")
    rp = dict(cfg.rope_parameters)
    rp["full_attention"] = dict(rp["full_attention"], partial_rotary_factor=1.0)
    full = load_f32(d, rope_parameters=rp)
    diff = max_lp_diff(base, full, ids)
    print(f"  {arch}: proportional rope 0.25 vs 1.0 on global layers: max |dlogprob| {diff:.3f}")
    assert diff > 0.1
    assert all(m.self_attn.v_proj is None for i, m in enumerate(layers) if i in glob and not m.self_attn.is_kv_shared_layer)
    # keys as values: V is the raw K projection under a weightless norm, not K as K is normed
    # (an engine that stores one normed tensor for both fails)
    with torch.no_grad():
        same = load_f32(d)
        for i in glob:
            a = text_model(same).layers[i].self_attn
            if not a.is_kv_shared_layer:
                a.v_norm = a.k_norm
    diff = max_lp_diff(base, same, ids)
    print(f"  {arch}: keys as values: V normed as K vs weightless: max |dlogprob| {diff:.3f}")
    assert diff > 0.1
    with torch.no_grad():
        scaled = load_f32(d)
        for m in text_model(scaled).layers:
            m.layer_scalar.fill_(1.0)
    diff = max_lp_diff(base, scaled, ids)
    print(f"  {arch}: layer_scalar vs 1: max |dlogprob| {diff:.3f}")
    assert diff > 0.1
    soft = load_f32(d, final_logit_softcapping=None)
    diff = max_lp_diff(base, soft, ids)
    print(f"  {arch}: final softcap 30 vs none: max |dlogprob| {diff:.3f}")
    assert diff > 0.01
    if cfg.hidden_size_per_layer_input:
        with torch.no_grad():
            no_ple = load_f32(d)
            for m in text_model(no_ple).layers:
                m.per_layer_projection.weight.zero_()
        diff = max_lp_diff(base, no_ple, ids)
        print(f"  {arch}: per-layer inputs vs none: max |dlogprob| {diff:.3f}")
        assert diff > 0.1
    if cfg.num_kv_shared_layers:
        modes = cfg.kv_sharing_modes
        print(f"  {arch}: kv sharing modes {modes}")
        assert modes.count("reuse") == cfg.num_kv_shared_layers
        consumers = [i for i, m in enumerate(modes) if m == "reuse"]
        assert {lt[i] for i in consumers} == {"sliding_attention", "full_attention"}
        widths = [m.mlp.gate_proj.weight.shape[0] for m in layers]
        print(f"  {arch}: MLP widths {widths} (double-wide on the KV-sharing layers)")
        assert all(widths[i] == 2 * cfg.intermediate_size for i in consumers)
        # sharing matters: the consumers given their producer's K/V projections and norms but
        # computing K/V from their own input instead of reading the producer's
        own = load_f32(d)
        with torch.no_grad():
            for i in consumers:
                producer = max(j for j in range(consumers[0]) if lt[j] == lt[i])
                a, p = text_model(own).layers[i].self_attn, text_model(own).layers[producer].self_attn
                a.k_proj, a.v_proj = copy.deepcopy(p.k_proj), copy.deepcopy(p.v_proj)
                a.k_norm, a.v_norm = copy.deepcopy(p.k_norm), copy.deepcopy(p.v_norm)
                a.is_kv_shared_layer = False
                a.store_full_length_kv = False
        diff = max_lp_diff(base, own, ids)
        print(f"  {arch}: shared K/V vs each consumer computing its own: max |dlogprob| {diff:.3f}")
        assert diff > 0.1
    if cfg.enable_moe_block:
        check_moe(arch, base, ids)
    if arch in COMPOSITE:
        print(f"  {arch}: reference class {type(base).__name__} (the hub's composite)")


@torch.no_grad()
def check_moe(arch, base, ids):
    """Decisive routing: the least gap between the k-th and (k+1)-th router probability over the
    prompt, in every layer, is far above f32 rounding."""
    k = base.config.get_text_config().top_k_experts
    gaps = []
    hooks = []

    def hook(_module, _inp, out):
        probs = out[0]
        top = torch.topk(probs.float(), k + 1, dim=-1).values
        gaps.append(float((top[:, k - 1] - top[:, k]).min()))

    for m in text_model(base).layers:
        hooks.append(m.router.register_forward_hook(hook))
    base(torch.tensor([ids]), use_cache=False)
    for h in hooks:
        h.remove()
    print(f"  {arch}: least gap between router probabilities {k} and {k + 1}: {min(gaps):.2e}")
    assert min(gaps) > 1e-4
