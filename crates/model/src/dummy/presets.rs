//! Model shapes built into `--load-format dummy`, copied from the models' `config.json`.
//! Llama 3.1's rope scaling is left out: dummy weights measure speed, not quality.

use crate::config::{Arch, BlockVariant, ModelConfig, RopeStyle};

pub const PRESET_NAMES: &[&str] = &["qwen2.5-0.5b", "qwen2.5-1.5b", "llama-3.1-8b", "tiny"];

pub fn preset(name: &str) -> Option<ModelConfig> {
    let qwen = |hidden, inter, layers, heads, head_dim| ModelConfig {
        arch: Arch::Qwen2,
        vocab_size: 151_936,
        hidden_size: hidden,
        intermediate_size: inter,
        num_layers: layers,
        num_heads: heads,
        num_kv_heads: 2,
        head_dim,
        rope_theta: 1_000_000.0,
        rope_style: RopeStyle::Halves,
        rms_norm_eps: 1e-6,
        max_position_embeddings: 32_768,
        tie_word_embeddings: true,
        qkv_bias: true,
        block: BlockVariant::llama(head_dim),
        rope_scaling: None,
        layer_attention: Vec::new(),
        moe: None,
        linear_attention: None,
    };
    Some(match name {
        "qwen2.5-0.5b" => qwen(896, 4864, 24, 14, 64),
        "qwen2.5-1.5b" => qwen(1536, 8960, 28, 12, 128),
        "llama-3.1-8b" => ModelConfig {
            arch: Arch::Llama,
            vocab_size: 128_256,
            hidden_size: 4096,
            intermediate_size: 14_336,
            num_layers: 32,
            num_heads: 32,
            num_kv_heads: 8,
            head_dim: 128,
            rope_theta: 500_000.0,
            rope_style: RopeStyle::Interleaved,
            rms_norm_eps: 1e-5,
            max_position_embeddings: 131_072,
            tie_word_embeddings: false,
            qkv_bias: false,
            block: BlockVariant::llama(128),
            rope_scaling: None,
            layer_attention: Vec::new(),
            moe: None,
            linear_attention: None,
        },
        // Small enough for tests on the CPU, with GQA (group 3) and the qwen2 bias path.
        "tiny" => ModelConfig {
            vocab_size: 1024,
            max_position_embeddings: 4096,
            ..qwen(384, 1024, 2, 6, 64)
        },
        _ => return None,
    })
}
