//! The families' translations of the fixtures' `config.json` files (fixtures/arch).

use std::path::PathBuf;

use serde_json::Value;

use crate::config::{
    Activation, Arch, BlockVariant, Llama3Scaling, ModelConfig, MoeConfig, RopeScaling, RopeStyle,
};
use crate::hf::HfError;
use crate::load::hf_config as config_from_json;

fn fixture(arch: &str, file: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/arch")
        .join(arch)
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn parse(arch: &str) -> ModelConfig {
    let legacy = config_from_json(&fixture(arch, "config.json")).unwrap();
    let v5 = config_from_json(&fixture(arch, "config.transformers5.json")).unwrap();
    assert_eq!(legacy, v5, "{arch}: the two layouts parse differently");
    legacy
}

/// A fixture's legacy config with `key` set to `value` (JSON).
fn with(arch: &str, key: &str, value: &str) -> Result<ModelConfig, HfError> {
    let mut v: Value = serde_json::from_str(&fixture(arch, "config.json")).unwrap();
    v[key] = serde_json::from_str(value).unwrap();
    config_from_json(&v.to_string())
}

fn error_of(result: Result<ModelConfig, HfError>) -> String {
    result.expect_err("should be refused").to_string()
}

#[test]
fn llama3_rope_scaling_parses_from_both_layouts() {
    let c = parse("llama");
    assert_eq!(c.arch, Arch::Llama);
    assert_eq!(c.rope_theta, 500_000.0);
    assert_eq!(
        c.rope_scaling,
        Some(RopeScaling::Llama3(Llama3Scaling {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 64,
        }))
    );
    assert!(c.layer_attention.is_empty());
    assert_eq!(c.block, BlockVariant::llama(16));
    assert!(!c.tie_word_embeddings);
}

#[test]
fn qwen2_sliding_window_without_use_sliding_window_is_no_window() {
    let c = parse("qwen2");
    assert_eq!(c.arch, Arch::Qwen2);
    assert!(c.qkv_bias && c.tie_word_embeddings);
    assert!(c.layer_attention.is_empty(), "{:?}", c.layer_attention);
    assert_eq!(c.attention(3).sliding_window, None);
    // With it on, layers from max_window_layers (2) slide.
    let on = with("qwen2", "use_sliding_window", "true").unwrap();
    let windows: Vec<_> = (0..4).map(|l| on.attention(l).sliding_window).collect();
    assert_eq!(windows, [None, None, Some(32), Some(32)]);
}

#[test]
fn qwen3_has_qk_norm_and_its_own_head_dim() {
    let c = parse("qwen3");
    assert_eq!(c.arch, Arch::Qwen3);
    assert_eq!((c.head_dim, c.hidden_size / c.num_heads), (32, 16));
    assert!(c.block.qk_norm && !c.qkv_bias);
    assert_eq!(c.block.attn_scale, 1.0 / 32f32.sqrt());
    assert!(c.layer_attention.is_empty());
}

#[test]
fn mistral_slides_on_every_layer() {
    let c = parse("mistral");
    assert_eq!(c.arch, Arch::Mistral);
    assert_eq!(c.rope_style, RopeStyle::Halves);
    for l in 0..c.num_layers {
        assert_eq!(c.attention(l).sliding_window, Some(32));
        assert_eq!(c.attention(l).rope_theta, 10_000.0);
    }
    let unwindowed = with("mistral", "sliding_window", "null").unwrap();
    assert!(unwindowed.layer_attention.is_empty());
}

#[test]
fn gemma3_block_and_layer_pattern() {
    let c = parse("gemma3");
    assert_eq!(c.arch, Arch::Gemma3);
    let b = c.block;
    assert!(b.qk_norm && b.post_norms);
    assert_eq!(b.norm_weight_offset, 1.0);
    assert_eq!(b.activation, Activation::GeluTanh);
    assert_eq!(b.embedding_scale, 8.0);
    assert_eq!(b.attn_scale, 1.0 / 24f32.sqrt());
    assert!(c.tie_word_embeddings);
    let full = [5];
    for l in 0..7 {
        let a = c.attention(l);
        if full.contains(&l) {
            assert_eq!((a.sliding_window, a.rope_theta), (None, 1e6), "layer {l}");
        } else {
            assert_eq!(
                (a.sliding_window, a.rope_theta),
                (Some(32), 1e4),
                "layer {l}"
            );
        }
    }
    // Without layer_types, the pattern gives the same layers.
    let mut v: Value = serde_json::from_str(&fixture("gemma3", "config.json")).unwrap();
    v.as_object_mut().unwrap().remove("layer_types");
    assert_eq!(config_from_json(&v.to_string()).unwrap(), c);
}

#[test]
fn fields_that_change_the_math_are_refused_by_name() {
    let cases = [
        ("gemma3", "attn_logit_softcapping", "50.0"),
        ("gemma3", "final_logit_softcapping", "30.0"),
        ("gemma3", "hidden_activation", "\"gelu\""),
        ("llama", "hidden_act", "\"relu\""),
        (
            "llama",
            "rope_scaling",
            r#"{"rope_type": "yarn", "factor": 4.0}"#,
        ),
        (
            "gemma3",
            "rope_scaling",
            r#"{"rope_type": "linear", "factor": 8.0}"#,
        ),
        (
            "llama",
            "rope_scaling",
            r#"{"rope_type": "llama3", "factor": 8.0}"#,
        ),
        ("llama", "mlp_bias", "true"),
        ("qwen3", "attention_bias", "true"),
        (
            "gemma3",
            "layer_types",
            r#"["sliding_attention", "chunked_attention"]"#,
        ),
    ];
    for (arch, key, value) in cases {
        let message = error_of(with(arch, key, value));
        assert!(message.contains(key), "{arch} {key}: {message}");
    }
    let mut v: Value =
        serde_json::from_str(&fixture("gemma3", "config.transformers5.json")).unwrap();
    v["rope_parameters"]["full_attention"]["rope_type"] = "dynamic".into();
    let message = error_of(config_from_json(&v.to_string()));
    assert!(
        message.contains("rope_parameters.full_attention.rope_type"),
        "{message}"
    );
}

#[test]
fn unknown_architecture_is_refused() {
    let mut v: Value = serde_json::from_str(&fixture("llama", "config.json")).unwrap();
    v["architectures"] = serde_json::json!(["Phi3ForCausalLM"]);
    v["model_type"] = "phi3".into();
    assert!(matches!(
        config_from_json(&v.to_string()),
        Err(HfError::UnsupportedArch(_))
    ));
}

#[test]
fn qwen3_moe_parses_from_both_layouts() {
    let c = parse("qwen3_moe");
    assert_eq!(c.arch, Arch::Qwen3);
    assert!(c.block.qk_norm && !c.qkv_bias);
    assert_eq!(
        c.moe,
        Some(MoeConfig {
            num_experts: 8,
            experts_per_token: 2,
            expert_intermediate_size: 32,
            norm_topk_prob: true,
            shared_expert_intermediate_size: None,
            sparse_layers: vec![true; 3],
            biases: false,
        })
    );
}

#[test]
fn qwen2_moe_has_a_shared_expert_and_a_dense_layer() {
    let c = parse("qwen2_moe");
    assert_eq!(c.arch, Arch::Qwen2);
    assert!(c.qkv_bias);
    let moe = c.moe.unwrap();
    assert_eq!(moe.shared_expert_intermediate_size, Some(64));
    assert!(!moe.norm_topk_prob);
    assert_eq!(moe.sparse_layers, [true, false, true]);
    assert_eq!(c.intermediate_size, 96);
    let stepped = with("qwen2_moe", "decoder_sparse_step", "2").unwrap();
    assert_eq!(stepped.moe.unwrap().sparse_layers, [false, false, false]);
    let stepped = with("qwen2_moe", "mlp_only_layers", "[]").unwrap();
    assert_eq!(stepped.moe.unwrap().sparse_layers, [true, true, true]);
}

#[test]
fn mixtral_experts_are_intermediate_size_wide_and_renormalised() {
    let c = parse("mixtral");
    assert_eq!(c.arch, Arch::Mistral);
    assert_eq!(c.rope_style, RopeStyle::Halves);
    assert!(c.layer_attention.is_empty(), "no sliding window");
    let moe = c.moe.unwrap();
    assert_eq!(
        (
            moe.num_experts,
            moe.experts_per_token,
            moe.expert_intermediate_size
        ),
        (8, 2, 32)
    );
    assert!(moe.norm_topk_prob);
    assert_eq!(moe.sparse_layers, [true, true]);
}

#[test]
fn bad_moe_fields_are_refused_by_name() {
    for (arch, key, value) in [
        ("qwen3_moe", "num_experts_per_tok", "9"),
        ("qwen3_moe", "decoder_sparse_step", "0"),
        ("qwen2_moe", "shared_expert_intermediate_size", "0"),
        ("mixtral", "num_experts_per_tok", "0"),
    ] {
        let message = error_of(with(arch, key, value));
        assert!(message.contains(key), "{arch} {key}: {message}");
    }
}
