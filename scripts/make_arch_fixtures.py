#!/usr/bin/env python3
"""Make ferrite's per-architecture Hugging Face fixtures with `transformers` as the oracle.

For each architecture (llama with Llama 3.x rope scaling, qwen2, qwen3, mistral with a sliding
window, gemma3 with alternating sliding/global layers, and the mixtures of experts qwen3_moe,
qwen2_moe with its shared expert and mixtral) this script:
  1. writes a tiny config.json that keeps the structure of the real family's config (the legacy
     hub layout: rope_theta / rope_scaling / rope_local_base_freq, as the real checkpoints have it),
  2. builds the model with `transformers` from that config, fills every parameter with seeded random
     values (scaled so the logits are far from flat), and saves it with save_pretrained in bfloat16
     (model.safetensors, generation_config.json); config.json is then written back in the legacy
     layout (transformers >= 5 would write `rope_parameters` instead),
  3. reloads THOSE bf16 weights in float32 (eager attention) and records, for 4 prompts of random
     token ids longer than the sliding window, the teacher-forced log-probability of each prompt token
     and a 16-token greedy continuation (full recompute at every step, EOS ignored) with the
     top-1 minus top-2 logit margin at every step, into reference.json; config.transformers5.json is
     the same config in the layout transformers >= 5 writes (rope_parameters).
For the mixtures of experts it also writes llama.cpp's GGUF layout of the same weights
(scripts/make_moe_gguf_fixtures.py, which runs alone too; needs gguf-py: pip install gguf).
Then it checks its own work (see check_*): the reference reproduces from a fresh load, generate()
with the KV cache gives the same greedy tokens, and the features each fixture is meant to exercise
(sliding window, rope scaling, local rope base, ...) really change the logits.

The hybrid Gated DeltaNet families (qwen3_next, qwen3_5, qwen3_5_moe; spec in
docs/models/gated-deltanet.md) follow the same steps, with these differences:
  - qwen3_5 and qwen3_5_moe are saved as the hub ships them: the composite vision-language
    config (model_type qwen3_5 / qwen3_5_moe, architectures *ForConditionalGeneration, the text
    model under text_config, a tiny random vision tower under vision_config) and the weights of
    *ForConditionalGeneration (model.language_model.*, model.visual.*, lm_head.weight). The
    reference is AutoModelForCausalLM on that directory (Qwen3_5ForCausalLM /
    Qwen3_5MoeForCausalLM: the text model only); the script checks that the full
    vision-language model gives the same logits on text. qwen3_5_moe's experts are rewritten
    stacked (mlp.experts.gate_up_proj [E, 2I, H], mlp.experts.down_proj [E, H, I]) as the hub
    checkpoints have them (save_pretrained writes one tensor per expert); checked to load
    cleanly and to give identical logits.
  - no GGUF copy (make_moe_gguf_fixtures.py does not know these architectures yet);
  - check_recurrent: token-by-token decoding with the cache (transformers' recurrent delta rule)
    against one full forward (its chunked delta rule, chunk 64, crossed by the 100-token prompt).

Usage: python3 scripts/make_arch_fixtures.py [ARCH ...]     (default: all; writes fixtures/arch/ARCH/)
Needs: pip install torch transformers safetensors gguf   (CPU, 2 threads: about 4 minutes, plus
about 7 for qwen3_next, qwen3_5 and qwen3_5_moe)
"""
import copy
import json
import re
import sys
import tempfile
from pathlib import Path

import safetensors.torch
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gemma4_fixtures  # noqa: E402
import make_moe_gguf_fixtures  # noqa: E402
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

torch.set_num_threads(2)
transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "arch"
PROMPT_LENGTHS = [20, 45, 70, 100]
NEW_TOKENS = 16
LOW_MARGIN = 0.25
CANDIDATES = 24  # random prompts tried per length (see pick_prompt)
FINAL_NORM = 4.0  # scale of the final norm weights: lets tied embeddings stay small
GEMMA_POST_NORM = 3.0
LOGIT_STD = 5.0
ROUTER_SCALE = 2.0  # target std of the output logits (flat logits would make greedy margins tiny)

# Tiny configs in the layout of the real hub config.json of each family. Comments name the real
# model whose structure is kept.
CONFIGS = {
    # Llama 3.1 8B: untied lm_head, rope_theta 500000, llama3 rope scaling (factor 8, low 1, high 4).
    # original_max_position_embeddings is 64 (real: 8192) so that, with head_dim 16, the 8 rope
    # frequencies hit all three branches of the llama3 formula: wavelength 6.3 < 64/4 kept,
    # 32.3 in [16, 64] smoothed, 166..4.4e5 > 64 divided by 8; prompts run to 116 positions.
    "llama": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "eos_token_id": [2, 3],
        "head_dim": 16,
        "hidden_act": "silu",
        "hidden_size": 64,
        "initializer_range": 0.02,
        "intermediate_size": 224,
        "max_position_embeddings": 2048,
        "mlp_bias": False,
        "num_attention_heads": 4,
        "num_hidden_layers": 5,
        "num_key_value_heads": 2,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": {
            "factor": 8.0,
            "high_freq_factor": 4.0,
            "low_freq_factor": 1.0,
            "original_max_position_embeddings": 64,
            "rope_type": "llama3",
        },
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
        "use_cache": True,
        "vocab_size": 1024,
    },
    # Qwen2.5-0.5B: QKV bias, tied embeddings, rope_theta 1e6. Like the real config it carries a
    # sliding_window with use_sliding_window false: transformers ignores the window then (here the
    # window is 32 < prompt length, so an engine that applies it fails the parity test).
    "qwen2": {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_act": "silu",
        "hidden_size": 64,
        "initializer_range": 0.02,
        "intermediate_size": 320,
        "max_position_embeddings": 32768,
        "max_window_layers": 2,
        "num_attention_heads": 4,
        "num_hidden_layers": 4,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": 32,
        "tie_word_embeddings": True,
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": 1024,
    },
    # Qwen3-0.6B: per-head q/k RMSNorm (before rope), no bias, head_dim 32 != hidden/heads = 16,
    # tied embeddings, rope_theta 1e6.
    "qwen3": {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "head_dim": 32,
        "hidden_act": "silu",
        "hidden_size": 64,
        "initializer_range": 0.02,
        "intermediate_size": 192,
        "max_position_embeddings": 40960,
        "max_window_layers": 4,
        "num_attention_heads": 4,
        "num_hidden_layers": 4,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": True,
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": 1024,
    },
    # Mistral 7B v0.1: sliding window on every layer (real 4096, here 32), untied, rope_theta 1e4.
    "mistral": {
        "architectures": ["MistralForCausalLM"],
        "model_type": "mistral",
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_act": "silu",
        "hidden_size": 64,
        "initializer_range": 0.02,
        "intermediate_size": 224,
        "max_position_embeddings": 32768,
        "num_attention_heads": 4,
        "num_hidden_layers": 4,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-05,
        "rope_theta": 10000.0,
        "sliding_window": 32,
        "tie_word_embeddings": False,
        "use_cache": True,
        "vocab_size": 1024,
    },
    # gemma-3-270m (Gemma3ForCausalLM, model_type gemma3_text): 5 sliding : 1 global layers
    # (7 layers here, so the pattern restarts), sliding window 32 (real 512), local rope base 1e4 on
    # sliding layers, rope_theta 1e6 on global ones, no rope scaling, head_dim 32 != hidden/heads,
    # softcapping null (as in the real config), tied embeddings. query_pre_attn_scalar is 24, not
    # head_dim (real 270m: 256 = head_dim; gemma-3-27b: 168 != head_dim 128), so that an engine that
    # scales by head_dim**-0.5 instead of query_pre_attn_scalar**-0.5 fails.
    "gemma3": {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "_sliding_window_pattern": 6,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "attn_logit_softcapping": None,
        "bos_token_id": 2,
        "eos_token_id": 1,
        "final_logit_softcapping": None,
        "head_dim": 32,
        "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": 64,
        "initializer_range": 0.02,
        "intermediate_size": 192,
        "layer_types": ["sliding_attention"] * 5 + ["full_attention"] + ["sliding_attention"],
        "max_position_embeddings": 32768,
        "num_attention_heads": 4,
        "num_hidden_layers": 7,
        "num_key_value_heads": 2,
        "pad_token_id": 0,
        "query_pre_attn_scalar": 24,
        "rms_norm_eps": 1e-06,
        "rope_local_base_freq": 10000.0,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": 32,
        "tie_word_embeddings": True,
        "use_bidirectional_attention": False,
        "use_cache": True,
        "vocab_size": 1024,
    },
    # Qwen3-30B-A3B (Qwen3MoeForCausalLM): every layer sparse (decoder_sparse_step 1, no
    # mlp_only_layers), softmax router over 8 experts (real 128), top-2 (real 8), norm_topk_prob true,
    # q/k norms as qwen3, untied. intermediate_size is the (unused here) dense MLP width. Kept small:
    # vocab 256, expert width 32 (a Q8_0 block, for the GGUF copy, see make_moe_gguf_fixtures.py).
    "qwen3_moe": {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "decoder_sparse_step": 1,
        "eos_token_id": 2,
        "head_dim": 16,
        "hidden_act": "silu",
        "hidden_size": 64,
        "initializer_range": 0.02,
        "intermediate_size": 128,
        "max_position_embeddings": 40960,
        "max_window_layers": 3,
        "mlp_only_layers": [],
        "moe_intermediate_size": 32,
        "norm_topk_prob": True,
        "num_attention_heads": 4,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "num_hidden_layers": 3,
        "num_key_value_heads": 2,
        "output_router_logits": False,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "router_aux_loss_coef": 0.001,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": 256,
    },
    # Qwen1.5-MoE-A2.7B / Qwen2-57B-A14B (Qwen2MoeForCausalLM): the shared-expert family. Every
    # layer has a shared expert (width shared_expert_intermediate_size) scaled by
    # sigmoid(shared_expert_gate(x)) next to the routed ones; norm_topk_prob false (the chosen
    # softmax probabilities are used as they are); QKV bias. Layer 1 is a dense MLP (mlp_only_layers)
    # so the per-layer switch is exercised.
    "qwen2_moe": {
        "architectures": ["Qwen2MoeForCausalLM"],
        "model_type": "qwen2_moe",
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "decoder_sparse_step": 1,
        "eos_token_id": 2,
        "hidden_act": "silu",
        "hidden_size": 64,
        "initializer_range": 0.02,
        "intermediate_size": 96,
        "max_position_embeddings": 8192,
        "max_window_layers": 3,
        "mlp_only_layers": [1],
        "moe_intermediate_size": 32,
        "norm_topk_prob": False,
        "num_attention_heads": 4,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "num_hidden_layers": 3,
        "num_key_value_heads": 2,
        "output_router_logits": False,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "router_aux_loss_coef": 0.001,
        "shared_expert_intermediate_size": 64,
        "sliding_window": 32,
        "tie_word_embeddings": True,
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": 256,
    },
    # Mixtral-8x7B (MixtralForCausalLM): llama attention, 8 experts, top-2 with the softmax taken
    # over the two chosen logits (softmax, top-2, renormalised), untied, no sliding window.
    "mixtral": {
        "architectures": ["MixtralForCausalLM"],
        "model_type": "mixtral",
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_act": "silu",
        "hidden_size": 64,
        "initializer_range": 0.02,
        "intermediate_size": 32,
        "max_position_embeddings": 32768,
        "num_attention_heads": 4,
        "num_experts_per_tok": 2,
        "num_hidden_layers": 2,
        "num_key_value_heads": 2,
        "num_local_experts": 8,
        "output_router_logits": False,
        "rms_norm_eps": 1e-05,
        "rope_theta": 1000000.0,
        "router_aux_loss_coef": 0.02,
        "router_jitter_noise": 0.0,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "use_cache": True,
        "vocab_size": 256,
    },
    # Qwen3-Next-80B-A3B (Qwen3NextForCausalLM): hybrid, 3 Gated DeltaNet (linear attention) layers
    # then 1 gated full-attention layer. Like the real config it has no layer_types, only
    # full_attention_interval 4 (transformers derives [linear, linear, linear, full]). Linear
    # attention: 2 key heads / 4 value heads (real 16 / 32), key/value head dim 16 (real 128), conv
    # kernel 4, fused in_proj_qkvz / in_proj_ba (grouped per key head). Full attention: 4 query
    # heads / 2 KV heads, head_dim 16 (real 256), q_proj doubled for the sigmoid output gate,
    # zero-centred q/k norms, partial_rotary_factor 0.25 (4 of 16 dims rotate), rope_theta 1e7.
    # Every layer sparse: 8 experts (real 512), top-2 (real 10), norm_topk_prob true, expert width
    # 32, a shared expert (width 64) behind a sigmoid gate; intermediate_size is the unused dense
    # width. Untied; legacy layout (rope_theta / partial_rotary_factor at the top).
    "qwen3_next": {
        "architectures": ["Qwen3NextForCausalLM"],
        "model_type": "qwen3_next",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "decoder_sparse_step": 1,
        "eos_token_id": 2,
        "full_attention_interval": 4,
        "head_dim": 16,
        "hidden_act": "silu",
        "hidden_size": 64,
        "initializer_range": 0.02,
        "intermediate_size": 128,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 16,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_value_head_dim": 16,
        "max_position_embeddings": 262144,
        "mlp_only_layers": [],
        "moe_intermediate_size": 32,
        "norm_topk_prob": True,
        "num_attention_heads": 4,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "num_hidden_layers": 4,
        "num_key_value_heads": 2,
        "output_router_logits": False,
        "partial_rotary_factor": 0.25,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 10000000,
        "router_aux_loss_coef": 0.001,
        "shared_expert_intermediate_size": 64,
        "tie_word_embeddings": False,
        "use_cache": True,
        "vocab_size": 256,
    },
    # Qwen3.5-0.8B / 2B (Qwen3_5ForConditionalGeneration, model_type qwen3_5): the hub's composite
    # vision-language config; the text model in text_config (model_type qwen3_5_text) with explicit
    # layer_types (8 layers: the 3-linear-1-full pattern twice) and full_attention_interval, the
    # rope in text_config.rope_parameters (rope_theta 1e7, partial_rotary_factor 0.25, mrope_section
    # scaled down to the 4 rotary frequencies of head_dim 32; on text all three position streams are
    # equal, so it cannot matter: checked), and the keys transformers does not read
    # (attn_output_gate, mamba_ssm_dtype, mtp_num_hidden_layers, mtp_use_dedicated_embeddings).
    # Separate in_proj_qkv / in_proj_z / in_proj_b / in_proj_a; 2 key heads / 6 value heads (1 : 3
    # as Qwen3.5-27B's 16 / 48); full-attention head_dim 32 != linear head dims 16; dense SwiGLU MLP;
    # tied embeddings (as the small Qwen3.5 models); vocab 512. A tiny random vision tower stands
    # for the real one (the text path never reads it). No mtp.* tensors (transformers neither
    # creates nor loads them).
    "qwen3_5": {
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "image_token_id": 248056,
        "text_config": {
            "attention_bias": False,
            "attention_dropout": 0.0,
            "attn_output_gate": True,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "full_attention_interval": 4,
            "head_dim": 32,
            "hidden_act": "silu",
            "hidden_size": 64,
            "initializer_range": 0.02,
            "intermediate_size": 128,
            "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 2,
            "linear_conv_kernel_dim": 4,
            "linear_key_head_dim": 16,
            "linear_num_key_heads": 2,
            "linear_num_value_heads": 6,
            "linear_value_head_dim": 16,
            "mamba_ssm_dtype": "float32",
            "max_position_embeddings": 262144,
            "model_type": "qwen3_5_text",
            "mtp_num_hidden_layers": 1,
            "mtp_use_dedicated_embeddings": False,
            "num_attention_heads": 4,
            "num_hidden_layers": 8,
            "num_key_value_heads": 2,
            "pad_token_id": None,
            "partial_rotary_factor": 0.25,
            "rms_norm_eps": 1e-06,
            "rope_parameters": {
                "mrope_interleaved": True,
                "mrope_section": [2, 1, 1],
                "partial_rotary_factor": 0.25,
                "rope_theta": 10000000,
                "rope_type": "default",
            },
            "tie_word_embeddings": True,
            "use_cache": True,
            "vocab_size": 512,
        },
        "tie_word_embeddings": True,
        "video_token_id": 248057,
        "vision_config": {
            "deepstack_visual_indexes": [],
            "depth": 1,
            "hidden_act": "gelu_pytorch_tanh",
            "hidden_size": 16,
            "in_channels": 3,
            "initializer_range": 0.02,
            "intermediate_size": 32,
            "model_type": "qwen3_5",
            "num_heads": 2,
            "num_position_embeddings": 16,
            "out_hidden_size": 64,
            "patch_size": 2,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
        "vision_end_token_id": 248054,
        "vision_start_token_id": 248053,
    },
    # Qwen3.5-35B-A3B (Qwen3_5MoeForConditionalGeneration, model_type qwen3_5_moe): composite as
    # qwen3_5; text_config model_type qwen3_5_moe_text, 4 layers [linear x3, full], every layer
    # sparse (no decoder_sparse_step / mlp_only_layers in this family), 8 experts (real 256) top-2
    # (real 8), the router always renormalises its top-k (no norm_topk_prob key), expert width 32,
    # shared expert 64 with its sigmoid gate; 2 key heads / 4 value heads, key head dim 16 but value
    # head dim 32 (real: both 128) so that the two cannot be confused; full-attention head_dim 16;
    # untied. Experts stored stacked as on the hub (see make()).
    "qwen3_5_moe": {
        "architectures": ["Qwen3_5MoeForConditionalGeneration"],
        "model_type": "qwen3_5_moe",
        "image_token_id": 248056,
        "text_config": {
            "attention_bias": False,
            "attention_dropout": 0.0,
            "attn_output_gate": True,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "full_attention_interval": 4,
            "head_dim": 16,
            "hidden_act": "silu",
            "hidden_size": 64,
            "initializer_range": 0.02,
            "layer_types": ["linear_attention"] * 3 + ["full_attention"],
            "linear_conv_kernel_dim": 4,
            "linear_key_head_dim": 16,
            "linear_num_key_heads": 2,
            "linear_num_value_heads": 4,
            "linear_value_head_dim": 32,
            "mamba_ssm_dtype": "float32",
            "max_position_embeddings": 262144,
            "model_type": "qwen3_5_moe_text",
            "moe_intermediate_size": 32,
            "mtp_num_hidden_layers": 1,
            "mtp_use_dedicated_embeddings": False,
            "num_attention_heads": 4,
            "num_experts": 8,
            "num_experts_per_tok": 2,
            "num_hidden_layers": 4,
            "num_key_value_heads": 2,
            "output_router_logits": False,
            "pad_token_id": None,
            "partial_rotary_factor": 0.25,
            "rms_norm_eps": 1e-06,
            "rope_parameters": {
                "mrope_interleaved": True,
                "mrope_section": [1, 1, 0],
                "partial_rotary_factor": 0.25,
                "rope_theta": 10000000,
                "rope_type": "default",
            },
            "router_aux_loss_coef": 0.001,
            "shared_expert_intermediate_size": 64,
            "tie_word_embeddings": False,
            "use_cache": True,
            "vocab_size": 256,
        },
        "tie_word_embeddings": False,
        "video_token_id": 248057,
        "vision_config": {
            "deepstack_visual_indexes": [],
            "depth": 1,
            "hidden_act": "gelu_pytorch_tanh",
            "hidden_size": 16,
            "in_channels": 3,
            "initializer_range": 0.02,
            "intermediate_size": 32,
            "model_type": "qwen3_5_moe",
            "num_heads": 2,
            "num_position_embeddings": 16,
            "out_hidden_size": 64,
            "patch_size": 2,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
        "vision_end_token_id": 248054,
        "vision_start_token_id": 248053,
    },
}

# gpt-oss-20b (GptOssForCausalLM) scaled down: attention with biases and a learned sink per
# head, layers alternating sliding (window 8 here, 128 in the release) and full attention, YaRN
# (factor 32 over 4,096, truncate false, as released), 8 experts (32 released) top-2 (4) with a
# biased router and clamped-SwiGLU experts with biases, head_dim 16 (64), untied.
CONFIGS["gpt_oss"] = {
    "architectures": ["GptOssForCausalLM"],
    "model_type": "gpt_oss",
    "attention_bias": True,
    "attention_dropout": 0.0,
    "eos_token_id": 2,
    "pad_token_id": 0,
    "head_dim": 16,
    "hidden_act": "silu",
    "hidden_size": 64,
    "initializer_range": 0.02,
    "intermediate_size": 32,
    "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    "max_position_embeddings": 131072,
    "num_attention_heads": 4,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 4,
    "num_key_value_heads": 2,
    "num_local_experts": 8,
    "output_router_logits": False,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                     "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": False},
    "rope_theta": 150000,
    "router_aux_loss_coef": 0.9,
    "sliding_window": 8,
    "swiglu_limit": 7.0,
    "tie_word_embeddings": False,
    "use_cache": True,
    "vocab_size": 256,
}

# generation_config.json per family (EOS ids as the real ones are laid out; no sampling defaults
# except llama's, as Llama 3.1 instruct has them). The reference ignores EOS: greedy is 16 tokens.
GENERATION = {
    "llama": {"bos_token_id": 1, "eos_token_id": [2, 3], "do_sample": True, "temperature": 0.6, "top_p": 0.9},
    "qwen2": {"bos_token_id": 1, "eos_token_id": 2},
    "qwen3": {"bos_token_id": 1, "eos_token_id": 2},
    "mistral": {"bos_token_id": 1, "eos_token_id": 2},
    "gemma3": {"bos_token_id": 2, "eos_token_id": [1, 106], "pad_token_id": 0},
    "qwen3_moe": {"bos_token_id": 1, "eos_token_id": 2},
    "qwen2_moe": {"bos_token_id": 1, "eos_token_id": 2},
    "mixtral": {"bos_token_id": 1, "eos_token_id": 2},
    "qwen3_next": {"bos_token_id": 1, "eos_token_id": 2},
    "qwen3_5": {"bos_token_id": 1, "eos_token_id": 2},
    "qwen3_5_moe": {"bos_token_id": 1, "eos_token_id": 2},
    "gpt_oss": {"bos_token_id": 1, "eos_token_id": [2, 3]},
}

SEEDS = {"llama": 101, "qwen2": 102, "qwen3": 103, "mistral": 104, "gemma3": 105, "qwen3_moe": 106,
         "qwen2_moe": 107, "mixtral": 109, "qwen3_next": 110, "qwen3_5": 111, "qwen3_5_moe": 112,
         "gpt_oss": 113}
MOE = ("qwen3_moe", "qwen2_moe", "mixtral", "qwen3_next", "qwen3_5_moe")
GDN = ("qwen3_next", "qwen3_5", "qwen3_5_moe")  # hybrid Gated DeltaNet + gated full attention
COMPOSITE = ("qwen3_5", "qwen3_5_moe")  # hub layout: vision-language config, text model in text_config
STACKED_EXPERTS = ("qwen3_5_moe",)  # hub stores experts stacked, not one tensor per expert
CONFIGS.update(gemma4_fixtures.CONFIGS)  # issue 38: Gemma 4 text (scripts/gemma4_fixtures.py)
COMPOSITE += gemma4_fixtures.COMPOSITE
GENERATION.update(gemma4_fixtures.GENERATION)
SEEDS.update(gemma4_fixtures.SEEDS)
CHUNK = 64  # transformers' chunk size for the chunked gated delta rule (torch_chunk_gated_delta_rule)


def write_json(path, obj):
    path.write_text(json.dumps(obj, indent=2) + "\n")


def hub_config(arch):
    cfg = copy.deepcopy(CONFIGS[arch])
    if arch in COMPOSITE:
        cfg["text_config"]["dtype"] = "bfloat16"  # where the real Qwen3.5 configs have it
    else:
        cfg["torch_dtype"] = "bfloat16"
    cfg["transformers_version"] = transformers.__version__
    return cfg


def text_config(config):
    """The text model's config (the composite's text_config, or the config itself)."""
    return config.get_text_config()


def randomize(model, arch, seed):
    """Seeded random values for every parameter, scaled so activations stay O(1) and logits have
    std ~LOGIT_STD. Norm weights are random too, so (1 + w) vs w conventions matter."""
    g = torch.Generator().manual_seed(seed)
    cfg = text_config(model.config)
    hidden = cfg.hidden_size
    gemma = arch == "gemma3"
    # the Gated DeltaNet families' RMSNorms are zero-centred like gemma's (weight w, scale 1 + w),
    # except the gated norm inside the linear attention (scale w)
    zero_centred = gemma or arch in GDN
    tied = cfg.tie_word_embeddings
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            shape = p.shape
            special = gemma4_fixtures.param_value(arch, name, shape, g, hidden)
            if special is not None:
                v = special
            elif ".visual." in name:
                # the vision tower of the composite checkpoints: present as on the hub, never read by
                # the text model
                v = (1.0 if name.endswith("norm.weight") else 0.0) + 0.02 * torch.randn(shape, generator=g)
            elif name.endswith("norm.weight"):
                final = name in ("model.norm.weight", "model.language_model.norm.weight")
                scale = FINAL_NORM if final else 1.0
                if gemma and (".post_attention_" in name or ".post_feedforward_" in name):
                    scale = GEMMA_POST_NORM  # keeps the sqrt(hidden)-scaled embedding from dominating
                v = scale * (1.0 + 0.15 * torch.randn(shape, generator=g))
                if zero_centred and not name.endswith("linear_attn.norm.weight"):
                    v = v - 1.0  # stored w, scaled by (1 + w)
            elif name.endswith("linear_attn.A_log"):
                # decay rate A = exp(A_log) per value head, log-uniform in [0.01, 1]: with
                # softplus(a + dt_bias) ~ 0.7 the per-token decay exp(g) ranges from ~0.5 (short
                # memory) to ~0.993 (the state still carries ~60% across a 64-token chunk)
                v = torch.empty(shape).uniform_(-4.6, 0.0, generator=g)
            elif name.endswith("linear_attn.dt_bias"):
                v = 0.5 * torch.randn(shape, generator=g)
            elif name.endswith("embed_tokens.weight"):
                # tied: also the output projection, so its std sets the logit scale (and it stays small
                # in the residual stream, else the model just repeats its last token)
                std = LOGIT_STD / (hidden**0.5 * FINAL_NORM) if tied else 1.0
                v = std * torch.randn(shape, generator=g)
            elif name == "lm_head.weight":
                v = (LOGIT_STD / (hidden**0.5 * FINAL_NORM)) * torch.randn(shape, generator=g)
            elif name.endswith(".bias") or name.endswith("_proj_bias"):
                v = 0.5 * torch.randn(shape, generator=g)
            elif name.endswith("self_attn.sinks"):
                # gpt-oss: a logit per head beside the scores (std ~1 here): it takes a real
                # share of each softmax
                v = torch.randn(shape, generator=g)
            elif name.endswith("mlp.experts.gate_up_proj") or name.endswith("mlp.experts.down_proj"):
                # gpt-oss stores experts transposed, [E, in, out]: fan_in is dim 1. gate_up x4 so
                # that some gates pass the SwiGLU clamp at 7
                v = torch.randn(shape, generator=g) / shape[1] ** 0.5
                if name.endswith("gate_up_proj"):
                    v = 4.0 * v
            elif p.dim() in (2, 3):
                # [out, in], transformers 5's stacked experts [E, out, in], or a depthwise conv1d
                # [channels, 1, kernel] (fan_in = kernel)
                fan_in = shape[-1]
                v = torch.randn(shape, generator=g) / fan_in**0.5
                if (name.endswith("mlp.gate.weight") or name.endswith("block_sparse_moe.gate.weight")
                        or name.endswith("mlp.router.weight")):
                    v = ROUTER_SCALE * v  # decisive routing: top-k gaps far above f32 noise
            else:
                raise RuntimeError(f"unexpected parameter {name} {tuple(shape)}")
            p.copy_(v.to(p.dtype))
    gemma4_fixtures.randomize_buffers(model, arch, seed)


def load_f32(path, **overrides):
    """float32, eager attention; overrides edit config.json (as a file) before it is parsed (in
    text_config for the composite configs)."""
    cfg = json.loads((Path(path) / "config.json").read_text())
    (cfg["text_config"] if "text_config" in cfg else cfg).update(overrides)
    with tempfile.TemporaryDirectory() as tmp:
        write_json(Path(tmp) / "config.json", cfg)
        config = AutoConfig.from_pretrained(tmp)
    return AutoModelForCausalLM.from_pretrained(
        path, config=config, dtype=torch.float32, attn_implementation="eager"
    ).eval()


@torch.no_grad()
def logits_of(model, ids):
    return model(torch.tensor([ids]), use_cache=False).logits[0].float()


@torch.no_grad()
def reference_for(model, ids):
    logits = logits_of(model, ids)
    lp = torch.log_softmax(logits.double(), dim=-1)
    prompt_lp = [None] + [float(lp[i - 1, ids[i]]) for i in range(1, len(ids))]
    seq = list(ids)
    greedy, margins = [], []
    for _ in range(NEW_TOKENS):
        last = logits_of(model, seq)[-1]
        top = torch.topk(last, 2)
        tok = int(top.indices[0])
        greedy.append(tok)
        margins.append(float(top.values[0] - top.values[1]))
        seq.append(tok)
    return {"ids": list(ids), "prompt_logprobs": prompt_lp, "greedy": greedy, "greedy_margins": margins}


def leading_safe_steps(r):
    return next((i for i, x in enumerate(r["greedy_margins"]) if x < LOW_MARGIN), NEW_TOKENS)


def pick_prompt(model, arch, n, vocab):
    """Random prompt of n ids (ids 0..7 avoided: pad/bos/eos here). Of CANDIDATES seeded draws, keep
    the one whose greedy continuation keeps margin >= LOW_MARGIN the longest (ties: larger least
    margin), so the greedy comparison covers as many steps as possible; continuations of fewer than
    8 distinct tokens rank lower (a model stuck repeating one token tests little)."""
    g = torch.Generator().manual_seed(SEEDS[arch] * 1000 + n)
    best = None
    for _ in range(CANDIDATES):
        r = quick_greedy(model, torch.randint(8, vocab, (n,), generator=g).tolist())
        key = (leading_safe_steps(r), min(len(set(r["greedy"])), 8), min(r["greedy_margins"]))
        if best is None or key > best[0]:
            best = (key, r)
        if key[:2] == (NEW_TOKENS, 8):
            break
    return reference_for(model, best[1]["ids"])


@torch.no_grad()
def quick_greedy(model, ids):
    """Greedy with the KV cache (fast; only used to choose prompts, the reference recomputes)."""
    out = model.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
                         eos_token_id=None, pad_token_id=0, output_logits=True, return_dict_in_generate=True)
    margins = [float(t[0] - t[1]) for t in (torch.topk(l[0].float(), 2).values for l in out.logits)]
    return {"ids": ids, "greedy": out.sequences[0, len(ids):].tolist(), "greedy_margins": margins}


def make(arch):
    d = OUT / arch
    d.mkdir(parents=True, exist_ok=True)
    for f in d.iterdir():
        f.unlink()
    cfg_json = hub_config(arch)
    with tempfile.TemporaryDirectory() as tmp:
        write_json(Path(tmp) / "config.json", cfg_json)
        config = AutoConfig.from_pretrained(tmp)
    torch.manual_seed(SEEDS[arch])
    if arch in COMPOSITE:
        # the whole vision-language model, so that the checkpoint has the hub's names
        # (model.language_model.*, model.visual.*, lm_head.weight)
        model = AutoModelForImageTextToText.from_config(config, dtype=torch.float32)
    else:
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    randomize(model, arch, SEEDS[arch])
    model = model.to(torch.bfloat16)
    model.generation_config = transformers.GenerationConfig(**GENERATION[arch])
    model.save_pretrained(d, safe_serialization=True)
    # Back to the legacy layout that real hub checkpoints have (transformers 5 writes rope_parameters).
    write_json(d / "config.json", cfg_json)
    assert sorted(p.name for p in d.iterdir()) == ["config.json", "generation_config.json", "model.safetensors"], list(d.iterdir())
    check_loads_cleanly(d)
    if arch in STACKED_EXPERTS:
        stack_experts(d)

    ref_model = load_f32(d)
    check_config_roundtrip(text_config(config), text_config(ref_model.config))
    # The same config as transformers >= 5 writes it (rope_parameters, dtype): checkpoints saved by
    # newer tooling look like this, so a loader should accept both layouts. (The composite configs
    # are written whole, vision part included, as a save of the hub's model class would.)
    with tempfile.TemporaryDirectory() as tmp:
        (config if arch in COMPOSITE else ref_model.config).save_pretrained(tmp)
        v5 = json.loads((Path(tmp) / "config.json").read_text())
        # the weights' dtype (the model above was loaded in float32)
        for sub in ((v5["text_config"], v5["vision_config"]) if arch in COMPOSITE else (v5,)):
            if sub is not None:  # (Gemma 4's fixture has no vision tower)
                sub["dtype"] = "bfloat16"
        check_config_roundtrip(config, AutoConfig.from_pretrained(tmp))
    write_json(d / "config.transformers5.json", v5)
    prompts = [pick_prompt(ref_model, arch, n, text_config(config).vocab_size) for n in PROMPT_LENGTHS]
    ref = {
        "arch": arch,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "dtype_of_weights": "bfloat16",
        "reference_dtype": "float32",
        "attn_implementation": "eager",
        "new_tokens": NEW_TOKENS,
        "note": "prompt_logprobs[i] = log p(ids[i] | ids[:i]) (natural log, float32 forward); "
        "greedy: argmax with full recompute, EOS ignored; greedy_margins: top1 - top2 logit",
        "prompts": prompts,
    }
    write_json(d / "reference.json", ref)
    return ref


def check_loads_cleanly(d):
    """Every tensor of the text model is in the file and nothing unexpected is left over (the
    composite checkpoints' model.visual.* are ignored by the *ForCausalLM classes by design)."""
    _, info = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v}
    assert not bad, f"{d.name}: {bad}"


@torch.no_grad()
def stack_experts(d):
    """Rewrite the per-expert tensors save_pretrained writes (mlp.experts.E.{gate,up,down}_proj.weight)
    as the Qwen3.5-MoE hub checkpoints store them: per layer mlp.experts.gate_up_proj [E, 2I, H]
    (each expert's gate rows, then its up rows) and mlp.experts.down_proj [E, H, I], no .weight
    suffix. Checked: loads cleanly and gives bit-identical logits."""
    path = d / "model.safetensors"
    ids = torch.tensor([list(range(8, 72))])
    before = load_f32(d)(ids, use_cache=False).logits
    tensors = safetensors.torch.load_file(path)
    pattern = re.compile(r"(.*\.mlp\.experts)\.(\d+)\.(gate|up|down)_proj\.weight")
    per_layer = {}
    for name in list(tensors):
        m = pattern.fullmatch(name)
        if m:
            per_layer.setdefault(m[1], {})[(int(m[2]), m[3])] = tensors.pop(name)
    for prefix, ws in per_layer.items():
        n = 1 + max(e for e, _ in ws)
        tensors[f"{prefix}.gate_up_proj"] = torch.stack([torch.cat([ws[(e, "gate")], ws[(e, "up")]]) for e in range(n)])
        tensors[f"{prefix}.down_proj"] = torch.stack([ws[(e, "down")] for e in range(n)])
    assert per_layer
    safetensors.torch.save_file(tensors, path, metadata={"format": "pt"})
    check_loads_cleanly(d)
    after = load_f32(d)(ids, use_cache=False).logits
    assert torch.equal(before, after), float((before - after).abs().max())
    print(f"  {d.name}: experts stacked as on the hub ({len(per_layer)} layers); logits unchanged")


def check_config_roundtrip(built, loaded):
    a, b = built.to_dict(), loaded.to_dict()
    for k in ("transformers_version", "dtype", "torch_dtype", "_name_or_path", "architectures"):
        a.pop(k, None)
        b.pop(k, None)
    diff = {k: (a.get(k), b.get(k)) for k in set(a) | set(b) if a.get(k) != b.get(k)}
    assert not diff, f"config changed on reload: {diff}"


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------

def max_lp_diff(m1, m2, ids, start=0):
    a = torch.log_softmax(logits_of(m1, ids), -1)
    b = torch.log_softmax(logits_of(m2, ids), -1)
    return float((a[start:] - b[start:]).abs().max())


def check_reproduces(arch, ref):
    d = OUT / arch
    model = load_f32(d)
    for p in ref["prompts"]:
        again = reference_for(model, p["ids"])
        assert again["greedy"] == p["greedy"], arch
        lp = [x for x in p["prompt_logprobs"][1:]]
        lp2 = [x for x in again["prompt_logprobs"][1:]]
        assert max(abs(x - y) for x, y in zip(lp, lp2)) < 1e-5, arch
        # generate() with the KV cache (sliding-window cache layers included) agrees
        out = model.generate(torch.tensor([p["ids"]]), max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                             do_sample=False, eos_token_id=None, pad_token_id=0)
        gen = out[0, len(p["ids"]):].tolist()
        if gen != p["greedy"]:
            first = next(i for i, (x, y) in enumerate(zip(gen, p["greedy"])) if x != y)
            print(f"  {arch}: generate() differs from full recompute at step {first} "
                  f"(margin {p['greedy_margins'][first]:.3f})")
            # the Gated DeltaNet fixtures: cached decoding runs the recurrent delta rule, full
            # recompute the chunked one; they must agree
            assert arch not in GDN, arch
    if arch in GDN:
        print(f"  {arch}: generate() with the cache (chunked prefill, recurrent decode) = full recompute "
              f"on all {len(ref['prompts'])} prompts")
    # bf16 weights loaded as bf16 and run in bf16: how far is that from the f32 reference?
    mb = AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16, attn_implementation="eager").eval()
    diffs = []
    for p in ref["prompts"]:
        lp = torch.log_softmax(logits_of(mb, p["ids"]).double(), -1)
        ids = p["ids"]
        diffs += [abs(float(lp[i - 1, ids[i]]) - p["prompt_logprobs"][i]) for i in range(1, len(ids))]
    print(f"  {arch}: transformers in bf16 vs the f32 reference: prompt logprob mean |d| "
          f"{sum(diffs) / len(diffs):.4f}, max {max(diffs):.4f}")


def check_features(arch, ref):
    d = OUT / arch
    base = load_f32(d)
    ids = ref["prompts"][-1]["ids"]  # 100 tokens
    W = getattr(base.config, "sliding_window", None)
    if arch in ("mistral", "gemma3"):
        wide = load_f32(d, sliding_window=4096)
        early = max_lp_diff(base, wide, ids[:W])
        late = max_lp_diff(base, wide, ids, start=W)
        print(f"  {arch}: window {W} vs 4096: max |dlogprob| positions <{W}: {early:.2e}, >= {W}: {late:.3f}")
        assert early < 1e-5 and late > 0.1, arch
        check_window_edge(arch, d, W)
    if arch == "gemma3":
        lt = base.config.layer_types
        print(f"  gemma3: layer_types {lt}")
        assert "sliding_attention" in lt and "full_attention" in lt
        assert [m.self_attn.sliding_window for m in base.model.layers] == [W if t == "sliding_attention" else None for t in lt]
        local = load_f32(d, rope_local_base_freq=1000000.0)
        print(f"  gemma3: rope_local_base_freq 1e4 vs 1e6: max |dlogprob| {max_lp_diff(base, local, ids):.3f}")
        allfull = load_f32(d, layer_types=["full_attention"] * len(lt))
        print(f"  gemma3: all layers full attention: max |dlogprob| {max_lp_diff(base, allfull, ids):.3f}")
        print(f"  gemma3: embed_scale buffer {float(base.model.embed_tokens.embed_scale):.6f} "
              f"(sqrt(hidden) = {base.config.hidden_size ** 0.5:.6f}; bf16-rounded in a bf16 run)")
    if arch == "qwen2":
        wide = load_f32(d, sliding_window=4096)
        diff = max_lp_diff(base, wide, ids)
        print(f"  qwen2: use_sliding_window=false: window 32 vs 4096 max |dlogprob| {diff:.2e} (must be 0)")
        assert diff == 0.0
        assert set(base.config.layer_types) == {"full_attention"}
    if arch == "llama":
        plain = load_f32(d, rope_scaling=None)
        diff_all = max_lp_diff(base, plain, ids)
        diff_early = max_lp_diff(base, plain, ids[:8])
        print(f"  llama: llama3 rope scaling vs none: max |dlogprob| {diff_all:.3f} (first 8 positions {diff_early:.3f})")
        assert diff_all > 0.1
        inv = base.model.rotary_emb.inv_freq
        print(f"  llama: inv_freq {[f'{x:.6g}' for x in inv.tolist()]}")
    if arch == "qwen3":
        hd = base.config.head_dim
        assert hd != base.config.hidden_size // base.config.num_attention_heads
        assert base.model.layers[0].self_attn.q_norm.weight.shape[0] == hd
    if arch in GDN:
        check_gdn_features(arch, d, base, ids)
    if arch == "gpt_oss":
        check_gpt_oss_features(d, base, ids)
    if gemma4_fixtures.is_gemma4(arch):
        gemma4_fixtures.check_features(arch, d, base, ids, load_f32, max_lp_diff)


def check_gpt_oss_features(d, base, ids):
    """Each gpt-oss feature moves the answers, so a loader that drops one fails the parity."""
    W = base.config.sliding_window
    wide = load_f32(d, sliding_window=4096)
    print(f"  gpt_oss: window {W} vs 4096: max |dlogprob| positions >= {W}: "
          f"{max_lp_diff(base, wide, ids, start=W):.3f}, < {W}: {max_lp_diff(base, wide, ids[:W]):.2e}")
    # (rope_scaling None would give transformers' gpt-oss default, which is this yarn)
    plain = load_f32(d, rope_scaling={"rope_type": "default"})
    yarn_diff = max_lp_diff(base, plain, ids)
    print(f"  gpt_oss: yarn vs plain rope: max |dlogprob| {yarn_diff:.3f}")
    assert yarn_diff > 0.1
    loose = load_f32(d, swiglu_limit=1000.0)
    print(f"  gpt_oss: swiglu_limit 7 vs 1000: max |dlogprob| {max_lp_diff(base, loose, ids):.3f}")
    no_sinks = load_f32(d)
    with torch.no_grad():
        for layer in no_sinks.model.layers:
            layer.self_attn.sinks.fill_(-1e9)
    print(f"  gpt_oss: sinks vs none: max |dlogprob| {max_lp_diff(base, no_sinks, ids):.3f}")
    ga = [float(m.self_attn.sinks.detach().abs().max()) for m in base.model.layers]
    assert min(ga) > 0.1 and max_lp_diff(base, no_sinks, ids) > 0.1
    assert max_lp_diff(base, loose, ids) > 0.01, "the clamp never bites: scale gate_up up"


def rope_overrides(arch, d, **rope):
    """Overrides for load_f32 that change the rope: the legacy layout has the keys at the top of the
    config, the composite ones in text_config.rope_parameters (and partial_rotary_factor beside it)."""
    if arch not in COMPOSITE:
        return rope
    rp = dict(json.loads((d / "config.json").read_text())["text_config"]["rope_parameters"], **rope)
    out = {"rope_parameters": rp}
    if "partial_rotary_factor" in rope:
        out["partial_rotary_factor"] = rope["partial_rotary_factor"]
    return out


def check_gdn_features(arch, d, base, ids):
    cfg = base.config
    lt = cfg.layer_types
    print(f"  {arch}: layer_types {lt}")
    if arch == "qwen3_next":
        # the real Qwen3-Next config has no layer_types: derived from full_attention_interval 4
        assert "layer_types" not in json.loads((d / "config.json").read_text())
    assert lt == [("full_attention" if (i + 1) % 4 == 0 else "linear_attention") for i in range(cfg.num_hidden_layers)]
    assert [hasattr(layer, "linear_attn") for layer in base.model.layers] == [t == "linear_attention" for t in lt]
    assert cfg.linear_num_value_heads > cfg.linear_num_key_heads
    rot = base.model.rotary_emb.inv_freq.shape[0] * 2
    print(f"  {arch}: rotary dims {rot} of head_dim {cfg.head_dim} (partial_rotary_factor 0.25), "
          f"inv_freq {[f'{x:.4g}' for x in base.model.rotary_emb.inv_freq.tolist()]}")
    assert rot == cfg.head_dim // 4
    full = load_f32(d, **rope_overrides(arch, d, partial_rotary_factor=1.0))
    diff = max_lp_diff(base, full, ids)
    print(f"  {arch}: partial_rotary_factor 0.25 vs 1.0: max |dlogprob| {diff:.3f}")
    assert diff > 0.1
    if arch in COMPOSITE:
        # text only: the three mrope position streams are equal, so the section split cannot matter
        half = base.model.rotary_emb.inv_freq.shape[0]
        other = load_f32(d, **rope_overrides(arch, d, mrope_section=[half, 0, 0]))
        diff = max_lp_diff(base, other, ids)
        print(f"  {arch}: mrope_section {cfg.rope_parameters['mrope_section']} vs {[half, 0, 0]}: "
              f"max |dlogprob| {diff:.1e} (text only: plain rope)")
        assert diff == 0.0
        check_composite(arch, d, base, ids)
    assert len(ids) > CHUNK
    print(f"  {arch}: the {len(ids)}-token prompt spans {-(-len(ids) // CHUNK)} chunks of the chunked delta rule")


@torch.no_grad()
def check_composite(arch, d, base, ids):
    """The full vision-language class (the hub's architectures entry) gives the same logits on text
    as the text-only class the reference uses."""
    vl = AutoModelForImageTextToText.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
    a = logits_of(base, ids)
    b = vl(input_ids=torch.tensor([ids]), use_cache=False).logits[0].float()
    print(f"  {arch}: {type(vl).__name__} vs {type(base).__name__} on text: max |dlogit| "
          f"{float((a - b).abs().max()):.1e}")
    assert torch.allclose(a, b, atol=1e-5, rtol=0)


@torch.no_grad()
def check_recurrent(arch, ref):
    """transformers' two delta-rule paths agree: one full forward of the longest prompt and its
    greedy continuation (chunked, chunk 64, no cache) against feeding it one token at a time with the
    cache (the first token chunked, every later one through the recurrent rule and the conv state).
    Also reports the decode state each linear-attention layer keeps."""
    model = load_f32(OUT / arch)
    p = ref["prompts"][-1]
    ids = p["ids"] + p["greedy"]
    full = torch.log_softmax(logits_of(model, ids), -1)
    out = model(torch.tensor([ids[:1]]), use_cache=True)
    cache = out["cache"] if "cache" in out else out["past_key_values"]
    steps = [out.logits[0, -1]]
    for t in ids[1:]:
        out = model(torch.tensor([[t]]), cache=cache, use_cache=True)
        steps.append(out.logits[0, -1])
    step = torch.log_softmax(torch.stack(steps).float(), -1)
    diff = float((full - step).abs().max())
    print(f"  {arch}: {len(ids)} tokens one at a time (recurrent) vs one forward (chunked): max |dlogprob| {diff:.1e}")
    assert diff < 1e-3, arch
    lin = next(i for i, t in enumerate(model.config.layer_types) if t == "linear_attention")
    layer = cache.layers[lin]
    conv, rec = layer.conv_states[0], layer.recurrent_states[0]
    print(f"  {arch}: decode state per linear layer: conv {tuple(conv.shape)} {conv.dtype}, "
          f"recurrent {tuple(rec.shape)} {rec.dtype} ({type(layer).__name__})")


@torch.no_grad()
def check_window_edge(arch, d, W):
    """Which keys does a sliding layer see? One-layer copy of the model (its first layer is a
    sliding one): changing the token W-1 places back changes the logits at q; W places back does not."""
    one = load_f32(d, num_hidden_layers=1, **({"layer_types": ["sliding_attention"]} if arch == "gemma3" else {}))
    ids = list(range(10, 10 + 2 * W + 4))
    q = 2 * W
    base = logits_of(one, ids)[q]
    def changed(pos):
        alt = list(ids)
        alt[pos] = 999
        return float((logits_of(one, alt)[q] - base).abs().max())
    inside, outside = changed(q - (W - 1)), changed(q - W)
    print(f"  {arch}: window edge at q={q}: key q-{W - 1} changes logits by {inside:.3f}, key q-{W} by {outside:.1e}"
          f" -> a sliding layer attends to the last {W} tokens including itself")
    assert inside > 1e-4 and outside == 0.0


@torch.no_grad()
def check_moe(arch, ref):
    """Routing is decisive (a near-tie between the k-th and (k+1)-th router logit would let f32
    rounding pick another expert, which no engine could be blamed for) and the MoE switches the
    fixture carries really change the logits."""
    d = OUT / arch
    base = load_f32(d)
    k = base.config.num_experts_per_tok
    gaps = []
    for p in ref["prompts"]:
        out = base(torch.tensor([p["ids"] + p["greedy"]]), use_cache=False, output_router_logits=True)
        for layer_logits in out.router_logits:
            top = torch.topk(layer_logits.float(), k + 1, dim=-1).values
            gaps.append(float((top[:, k - 1] - top[:, k]).min()))
    print(f"  {arch}: least gap between router logits {k} and {k + 1} over all tokens and sparse layers: "
          f"{min(gaps):.2e} ({len(gaps)} prompt x layer)")
    assert min(gaps) > 1e-4, arch  # f32 rounding of O(1) logits is ~1e-6
    ids = ref["prompts"][-1]["ids"]
    # (mixtral: softmax over the chosen two, no switch; qwen3_5_moe: always renormalised, no key)
    has_flag = hasattr(base.config, "norm_topk_prob") and arch != "mixtral"
    flipped = load_f32(d, norm_topk_prob=not base.config.norm_topk_prob) if has_flag else None
    if flipped is not None:
        diff = max_lp_diff(base, flipped, ids)
        print(f"  {arch}: norm_topk_prob flipped: max |dlogprob| {diff:.3f}")
        assert diff > 0.1
    if arch == "qwen2_moe":
        kinds = [type(layer.mlp).__name__ for layer in base.model.layers]
        print(f"  qwen2_moe: MLP per layer {kinds}")
        assert kinds[1] == "Qwen2MoeMLP" and "SparseMoeBlock" in kinds[0]
        dense_all = load_f32(d, mlp_only_layers=[])
        assert any(type(layer.mlp).__name__ != "Qwen2MoeMLP" for layer in dense_all.model.layers)


# ---------------------------------------------------------------------------------------------
# Independent re-implementation of docs/models/gated-deltanet.md
# ---------------------------------------------------------------------------------------------

@torch.no_grad()
def spec_forward(d, ids, mistake=None):
    """Plain-torch float32 forward of the text model, written from docs/models/gated-deltanet.md
    (recurrent delta rule, token by token); returns the logits [T, vocab]. `mistake` names one
    plausible implementation error to make instead (see MISTAKES), to show the fixture catches it."""
    d = Path(d)
    cfg = json.loads((d / "config.json").read_text())
    cfg = cfg.get("text_config", cfg)
    W = {k: v.float() for k, v in safetensors.torch.load_file(d / "model.safetensors").items()}
    pre = "model.language_model." if "model.language_model.embed_tokens.weight" in W else "model."
    L, eps = cfg["num_hidden_layers"], cfg["rms_norm_eps"]
    interval = cfg.get("full_attention_interval", 4)
    types = cfg.get("layer_types") or ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(L)]
    rp = cfg.get("rope_parameters") or {}
    theta = rp.get("rope_theta", cfg.get("rope_theta", 10000.0))
    prf = rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 0.25))
    nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    nk, nv, dk, dv, K = (cfg["linear_num_key_heads"], cfg["linear_num_value_heads"], cfg["linear_key_head_dim"],
                         cfg["linear_value_head_dim"], cfg["linear_conv_kernel_dim"])
    r = nv // nk
    T = len(ids)

    def rms(x, w, one_plus):  # over the last dim
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        return y * ((1.0 + w) if one_plus != (mistake == "norm_w_vs_1+w") else w)

    def lin(x, name):
        return x @ W[name].T

    def mlp(x, p):
        return lin(F.silu(lin(x, p + "gate_proj.weight")) * lin(x, p + "up_proj.weight"), p + "down_proj.weight")

    x = W[pre + "embed_tokens.weight"][torch.tensor(ids)]
    rd = hd if mistake == "rope_full_head_dim" else int(hd * prf)
    inv = 1.0 / (theta ** (torch.arange(0, rd, 2, dtype=torch.float32) / rd))
    ang = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)  # [T, rd]

    def rope(t):  # [T, heads, hd]: the first rd dims rotate, pairs (i, i + rd/2)
        a, b, rest = t[..., : rd // 2], t[..., rd // 2 : rd], t[..., rd:]
        if mistake == "rope_interleaved_pairs":  # pairs (2i, 2i + 1) instead
            a, b = t[..., 0:rd:2], t[..., 1:rd:2]
            c, s = cos[:, None, : rd // 2], sin[:, None, : rd // 2]
            rot = torch.stack([a * c - b * s, b * c + a * s], -1).flatten(-2)
            return torch.cat([rot, rest], -1)
        c, s = cos[:, None, :], sin[:, None, :]
        rot = torch.cat([a, b], -1) * c + torch.cat([-b, a], -1) * s
        return torch.cat([rot, rest], -1)

    for i in range(L):
        p = f"{pre}layers.{i}."
        h = rms(x, W[p + "input_layernorm.weight"], True)
        if types[i] == "linear_attention":
            la = p + "linear_attn."
            if la + "in_proj_qkvz.weight" in W and mistake == "qkvz_as_blocks":  # q | k | v | z, b | a
                P = lin(h, la + "in_proj_qkvz.weight")
                mixed, z = P[:, : 2 * nk * dk + nv * dv], P[:, 2 * nk * dk + nv * dv :].reshape(T, nv, dv)
                ba = lin(h, la + "in_proj_ba.weight")
                b, a = ba[:, :nv], ba[:, nv:]
            elif la + "in_proj_qkvz.weight" in W:  # qwen3_next: grouped per key head
                g4 = lin(h, la + "in_proj_qkvz.weight").view(T, nk, 2 * dk + 2 * r * dv)
                q, k, v, z = torch.split(g4, [dk, dk, r * dv, r * dv], -1)
                ba = lin(h, la + "in_proj_ba.weight").view(T, nk, 2 * r)
                b, a = ba[..., :r].reshape(T, nv), ba[..., r:].reshape(T, nv)
                mixed = torch.cat([q.reshape(T, -1), k.reshape(T, -1), v.reshape(T, -1)], -1)
                z = z.reshape(T, nv, dv)
            else:  # qwen3_5: separate projections, already q | k | v
                mixed = lin(h, la + "in_proj_qkv.weight")
                z = lin(h, la + "in_proj_z.weight").view(T, nv, dv)
                b, a = lin(h, la + "in_proj_b.weight"), lin(h, la + "in_proj_a.weight")
            cw = W[la + "conv1d.weight"][:, 0, :]  # [C, K]; tap K-1 multiplies the current token
            padded = torch.cat([torch.zeros(K - 1, mixed.shape[1]), mixed])
            conv = sum(cw[:, j] * padded[j : j + T] for j in range(K))
            mixed = conv if mistake == "conv_without_silu" else F.silu(conv)
            q, k, v = torch.split(mixed, [nk * dk, nk * dk, nv * dv], -1)
            l2 = lambda t: t * torch.rsqrt((t * t).sum(-1, keepdim=True) + 1e-6)
            rep = (lambda t: t.repeat(1, r, 1)) if mistake == "key_heads_tiled" else (lambda t: t.repeat_interleave(r, 1))
            q = rep(l2(q.view(T, nk, dk))) * dk**-0.5  # value head j <- key head j // r
            k = rep(l2(k.view(T, nk, dk)))
            v = v.view(T, nv, dv)
            beta = torch.sigmoid(b)
            g = -W[la + "A_log"].exp() * F.softplus(a + W[la + "dt_bias"])
            S = torch.zeros(nv, dk, dv)
            outs = []
            for t in range(T):
                S = S * g[t].exp()[:, None, None]
                pred = torch.einsum("hkv,hk->hv", S, k[t])
                delta = (v[t] - pred) * beta[t][:, None]
                S = S + k[t][:, :, None] * delta[:, None, :]
                outs.append(torch.einsum("hkv,hk->hv", S, q[t]))
            o = torch.stack(outs)  # [T, nv, dv]
            o = rms(o, W[la + "norm.weight"], mistake == "gated_norm_1+w") * F.silu(z)
            out = lin(o.reshape(T, nv * dv), la + "out_proj.weight")
        else:
            sa = p + "self_attn."
            qg = lin(h, sa + "q_proj.weight").view(T, nh, 2 * hd)
            q, gate = qg[..., :hd], qg[..., hd:].reshape(T, nh * hd)
            q = rope(rms(q, W[sa + "q_norm.weight"], True))
            k = rope(rms(lin(h, sa + "k_proj.weight").view(T, nkv, hd), W[sa + "k_norm.weight"], True))
            v = lin(h, sa + "v_proj.weight").view(T, nkv, hd)
            k, v = k.repeat_interleave(nh // nkv, 1), v.repeat_interleave(nh // nkv, 1)
            s = torch.einsum("qhd,khd->hqk", q, k) * hd**-0.5
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
            o = torch.einsum("hqk,khd->qhd", s.softmax(-1), v).reshape(T, nh * hd)
            out = lin(o if mistake == "no_output_gate" else o * torch.sigmoid(gate), sa + "o_proj.weight")
        x = x + out
        h = rms(x, W[p + "post_attention_layernorm.weight"], True)
        m = p + "mlp."
        if m + "gate.weight" not in W:
            x = x + mlp(h, m)
            continue
        E, topk = cfg["num_experts"], cfg["num_experts_per_tok"]
        probs = lin(h, m + "gate.weight").softmax(-1)
        top, idx = probs.topk(topk, -1)
        if cfg.get("norm_topk_prob", True):  # qwen3_5_moe: always
            top = top / top.sum(-1, keepdim=True)
        y = torch.zeros_like(h)
        for e in range(E):
            if m + "experts.gate_up_proj" in W:
                gu, down = W[m + "experts.gate_up_proj"][e], W[m + "experts.down_proj"][e]
                gw, uw = gu.chunk(2, 0)
            else:
                ep = f"{m}experts.{e}."
                gw, uw, down = W[ep + "gate_proj.weight"], W[ep + "up_proj.weight"], W[ep + "down_proj.weight"]
            wgt = (top * (idx == e)).sum(-1, keepdim=True)
            y = y + wgt * ((F.silu(h @ gw.T) * (h @ uw.T)) @ down.T)
        y = y + torch.sigmoid(lin(h, m + "shared_expert_gate.weight")) * mlp(h, m + "shared_expert.")
        x = x + y
    x = rms(x, W[pre + "norm.weight"], True)
    head = W.get("lm_head.weight", W[pre + "embed_tokens.weight"])
    return x @ head.T

# plausible implementation errors spec_forward can make on request; check_spec shows each one moves
# the logprobs far beyond the parity bar
MISTAKES = ("key_heads_tiled", "qkvz_as_blocks", "conv_without_silu", "gated_norm_1+w", "norm_w_vs_1+w",
            "rope_full_head_dim", "rope_interleaved_pairs", "no_output_gate")


def check_spec(arch, ref):
    """docs/models/gated-deltanet.md, executed: spec_forward (plain torch, no transformers, the
    recurrent delta rule token by token) on the saved bf16 weights reproduces reference.json, and
    each mistake in MISTAKES moves the logprobs of the 100-token prompt far off."""
    d = OUT / arch
    worst = 0.0
    for p in ref["prompts"]:
        ids = p["ids"]
        lp = torch.log_softmax(spec_forward(d, ids + p["greedy"]).double(), -1)
        worst = max(worst, max(abs(float(lp[i - 1, ids[i]]) - p["prompt_logprobs"][i]) for i in range(1, len(ids))))
        assert lp[len(ids) - 1 : -1].argmax(-1).tolist() == p["greedy"], arch  # teacher-forced greedy
    print(f"  {arch}: spec_forward (docs/models/gated-deltanet.md) vs the reference: max |dlogprob| {worst:.1e}, greedy equal")
    assert worst < 1e-3, arch
    p = ref["prompts"][-1]
    ids = p["ids"]
    moved = {}
    for mistake in MISTAKES:
        if mistake == "qkvz_as_blocks" and arch != "qwen3_next":
            continue
        lp = torch.log_softmax(spec_forward(d, ids, mistake).double(), -1)
        moved[mistake] = max(abs(float(lp[i - 1, ids[i]]) - p["prompt_logprobs"][i]) for i in range(1, len(ids)))
    print(f"  {arch}: max |dlogprob| of each mistake: " + ", ".join(f"{k} {v:.1f}" for k, v in moved.items()))
    assert min(moved.values()) > 0.3, moved


def margins_report(arch, ref):
    m = [x for p in ref["prompts"] for x in p["greedy_margins"]]
    low = sum(x < LOW_MARGIN for x in m)
    first_low = [leading_safe_steps(p) for p in ref["prompts"]]
    lps = [x for p in ref["prompts"] for x in p["prompt_logprobs"][1:]]
    print(f"{arch}: greedy margin < {LOW_MARGIN}: {low}/{len(m)} = {low / len(m):.2f}; min {min(m):.3f}; "
          f"steps before the first low margin, per prompt {first_low}; prompt logprob mean {sum(lps) / len(lps):.2f} min {min(lps):.2f}")


def main():
    archs = sys.argv[1:] or list(CONFIGS)
    for arch in archs:
        if arch not in CONFIGS:
            sys.exit(f"unknown arch {arch}; known: {' '.join(CONFIGS)}")
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    for arch in archs:
        ref = make(arch)
        margins_report(arch, ref)
        check_reproduces(arch, ref)
        check_features(arch, ref)
        if arch in MOE:
            check_moe(arch, ref)
        if arch in GDN:
            check_recurrent(arch, ref)
            check_spec(arch, ref)
        if arch in make_moe_gguf_fixtures.LAYOUTS:
            make_moe_gguf_fixtures.write(arch)
        size = sum(f.stat().st_size for f in (OUT / arch).iterdir())
        print(f"  {arch}: {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
