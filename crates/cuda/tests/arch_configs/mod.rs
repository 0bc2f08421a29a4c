//! One random-weight model per issue-12 architecture for the CPU/CUDA parity tests, shaped
//! like fixtures/arch/<arch>/config.json (same switches: rope scaling, biases, Q/K norm,
//! windows, layer pattern, activation, norms, scales; GQA 4 query heads / 2 KV heads, vocab
//! 1024) but with head_dim 64, the smallest the CUDA attention kernels are built for (the
//! fixtures use 16 and 32), and the hidden size grown to match where the fixture's is
//! heads x head_dim. `fixture_switches_match` checks the switches against what ferrite_model's
//! config parser makes of each fixture it parses (it refuses, with an error, what it cannot
//! run yet: those are skipped, saying so).

use ferrite_model::config::{
    Activation, Arch, BlockVariant, LayerAttention, Llama3Scaling, ModelConfig, MoeConfig,
    RopeScaling, RopeStyle,
};

const HEAD_DIM: usize = 64;
const WINDOW: usize = 32;

/// A small Llama with head_dim 128 and GQA 8/2 (the parity and batch-invariance tests).
pub fn llama_small() -> ModelConfig {
    ModelConfig {
        arch: Arch::Llama,
        vocab_size: 2048,
        hidden_size: 512,
        intermediate_size: 1408,
        num_layers: 3,
        num_heads: 8,
        num_kv_heads: 2,
        head_dim: 128,
        rope_theta: 500_000.0,
        rope_style: RopeStyle::Interleaved,
        rms_norm_eps: 1e-5,
        max_position_embeddings: 4096,
        tie_word_embeddings: false,
        qkv_bias: false,
        block: BlockVariant::llama(128),
        rope_scaling: None,
        layer_attention: Vec::new(),
        moe: None,
        linear_attention: None,
    }
}

fn base(arch: Arch, hidden: usize, inter: usize, layers: usize) -> ModelConfig {
    ModelConfig {
        arch,
        vocab_size: 1024,
        hidden_size: hidden,
        intermediate_size: inter,
        num_layers: layers,
        num_heads: 4,
        num_kv_heads: 2,
        head_dim: HEAD_DIM,
        rope_theta: 1e6,
        rope_style: RopeStyle::Halves,
        rms_norm_eps: 1e-6,
        max_position_embeddings: 32_768,
        tie_word_embeddings: true,
        qkv_bias: false,
        block: BlockVariant::llama(HEAD_DIM),
        rope_scaling: None,
        layer_attention: Vec::new(),
        moe: None,
        linear_attention: None,
    }
}

/// Llama 3.1: rope_theta 500000 with llama3 scaling (factor 8, original context 64): with
/// head_dim 64 the 32 frequencies hit all three branches (kept, smoothed, divided).
pub fn llama3() -> ModelConfig {
    ModelConfig {
        rope_theta: 500_000.0,
        rope_style: RopeStyle::Interleaved,
        rms_norm_eps: 1e-5,
        tie_word_embeddings: false,
        rope_scaling: Some(RopeScaling::Llama3(Llama3Scaling {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 64,
        })),
        ..base(Arch::Llama, 256, 704, 5)
    }
}

/// Qwen2.5: QKV bias, tied, no window (use_sliding_window false).
pub fn qwen2() -> ModelConfig {
    ModelConfig {
        qkv_bias: true,
        ..base(Arch::Qwen2, 256, 640, 4)
    }
}

/// Qwen3: per-head Q/K RMSNorm, no bias, head_dim 64 != hidden / heads = 32.
pub fn qwen3() -> ModelConfig {
    let mut c = base(Arch::Qwen3, 128, 384, 4);
    c.block.qk_norm = true;
    c
}

/// Qwen3-MoE: qwen3's block with a mixture of 16 experts of width 128, 4 per token,
/// normalised weights (tests/batch_invariance.rs; tests/moe.rs has the CPU/CUDA parity).
#[allow(dead_code)] // parity.rs includes this module too
pub fn qwen3_moe() -> ModelConfig {
    let mut c = qwen3();
    c.moe = Some(MoeConfig {
        num_experts: 16,
        experts_per_token: 4,
        expert_intermediate_size: 128,
        norm_topk_prob: true,
        shared_expert_intermediate_size: None,
        sparse_layers: vec![true; c.num_layers],
        biases: false,
    });
    c
}

/// Mistral 7B v0.1: sliding window 32 on every layer, rope_theta 10000, untied.
pub fn mistral() -> ModelConfig {
    let mut c = ModelConfig {
        rope_theta: 10_000.0,
        rms_norm_eps: 1e-5,
        tie_word_embeddings: false,
        ..base(Arch::Mistral, 256, 704, 4)
    };
    c.layer_attention = vec![
        LayerAttention {
            sliding_window: Some(WINDOW),
            rope_theta: c.rope_theta,
            rope_scaled: true,
        };
        c.num_layers
    ];
    c
}

/// Gemma 3 (270m's block): 7 layers, 5 sliding (window 32, rope base 1e4) + 1 full (1e6) +
/// 1 sliding; (1 + w) norms, Q/K norm, post norms, GeGLU (tanh), embeddings x sqrt(hidden),
/// scores x query_pre_attn_scalar^-0.5 with query_pre_attn_scalar 24 (not head_dim).
pub fn gemma3() -> ModelConfig {
    let mut c = base(Arch::Gemma3, 128, 384, 7);
    c.block = BlockVariant {
        qk_norm: true,
        norm_weight_offset: 1.0,
        post_norms: true,
        activation: Activation::GeluTanh,
        embedding_scale: (c.hidden_size as f32).sqrt(),
        attn_scale: 1.0 / 24f32.sqrt(),
        ..BlockVariant::llama(c.head_dim)
    };
    c.layer_attention = (0..c.num_layers)
        .map(|l| {
            let sliding = l != 5;
            LayerAttention {
                sliding_window: sliding.then_some(WINDOW),
                rope_theta: if sliding { 10_000.0 } else { 1e6 },
                rope_scaled: !sliding,
            }
        })
        .collect();
    c
}

/// Gemma 3 with its real head size, 256 (every Gemma 3 but 27B).
pub fn gemma3_hd256() -> ModelConfig {
    let mut c = gemma3();
    c.head_dim = 256;
    c.block.attn_scale = 1.0 / 256f32.sqrt();
    c
}

/// Gemma 3's block switches one at a time on the qwen3 block (which matches on its own), so
/// that a mismatch points at the switch that causes it.
pub fn qwen3_with(switch: &str) -> ModelConfig {
    let mut c = qwen3();
    let b = &mut c.block;
    match switch {
        "norm_offset" => b.norm_weight_offset = 1.0,
        "post_norms" => b.post_norms = true,
        "gelu_tanh" => b.activation = Activation::GeluTanh,
        "embedding_scale" => b.embedding_scale = (c.hidden_size as f32).sqrt(),
        "attn_scale" => b.attn_scale = 1.0 / 24f32.sqrt(),
        "window" => {
            c.layer_attention = (0..c.num_layers)
                .map(|_| LayerAttention {
                    sliding_window: Some(WINDOW),
                    rope_theta: c.rope_theta,
                    rope_scaled: false,
                })
                .collect()
        }
        other => panic!("no switch {other}"),
    }
    c
}

/// The switches a test config shares with its fixture (everything but the sizes and the
/// size-dependent scales).
fn switches(c: &ModelConfig) -> String {
    let b = &c.block;
    // (window, rope base, scaled): `rope_scaled` only matters with a scaling.
    let layers: Vec<_> = (0..c.num_layers)
        .map(|l| {
            let a = c.attention(l);
            let scaled = c.rope_scaling.is_some() && a.rope_scaled;
            (a.sliding_window, a.rope_theta, scaled)
        })
        .collect();
    format!(
        "arch {:?}, rope {:?}, bias {}, tied {}, eps {}, qk_norm {}, norm offset {}, \
         post_norms {}, {:?}, scaling {:?}, layers {layers:?}",
        c.arch,
        c.rope_style,
        c.qkv_bias,
        c.tie_word_embeddings,
        c.rms_norm_eps,
        b.qk_norm,
        b.norm_weight_offset,
        b.post_norms,
        b.activation,
        c.rope_scaling
    )
}

/// Runs without a GPU; prints one line per fixture.
#[test]
fn fixture_switches_match() {
    // The source tree this test was built from, or (a test executable carried to another
    // machine, run from the repository root) the current directory.
    let built = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/arch");
    let dir = if built.is_dir() {
        built
    } else {
        std::path::PathBuf::from("fixtures/arch")
    };
    for (name, ours) in [
        ("llama", llama3()),
        ("qwen2", qwen2()),
        ("qwen3", qwen3()),
        ("mistral", mistral()),
        ("gemma3", gemma3()),
    ] {
        let text = std::fs::read_to_string(dir.join(name).join("config.json")).unwrap();
        let parsed = match ferrite_model::load::hf_config(&text) {
            Ok(parsed) => parsed,
            Err(e) => {
                println!("SKIPPED parity config {name}: fixture not parsed yet ({e})");
                continue;
            }
        };
        assert_eq!(
            switches(&parsed),
            switches(&ours),
            "fixtures/arch/{name}/config.json (left) vs the CUDA parity config (right)"
        );
        // Gemma3's query_pre_attn_scalar is not head_dim: the same scale whatever the size.
        if name == "gemma3" {
            assert_eq!(
                parsed.block.attn_scale, ours.block.attn_scale,
                "gemma3 attn_scale"
            );
        }
        println!("parity config {name}: switches match the fixture");
    }
}
