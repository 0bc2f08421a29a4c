//! Gemma 4's translation: the hub's composite config (text_config) and the text-only one, the
//! per-layer geometry it gives the plan, and the checkpoint's tensor names.

use serde_json::{json, Value};

use crate::arch::hf_family;
use crate::config::ModelConfig;
use crate::hf::HfConfig;
use crate::load::hf_config;
use crate::plan::{Mixer, MlpSpec, ModelPlan};
use crate::tensor_names::LayerTensor;

/// google/gemma-4-E2B's text_config as released (the values that shape the model).
fn e2b_text() -> Value {
    let mut types = Vec::new();
    for l in 0..35 {
        types.push(if (l + 1) % 5 == 0 {
            "full_attention"
        } else {
            "sliding_attention"
        });
    }
    json!({
        "model_type": "gemma4_text",
        "attention_k_eq_v": false,
        "final_logit_softcapping": 30.0,
        "global_head_dim": 512,
        "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": 1536,
        "hidden_size_per_layer_input": 256,
        "intermediate_size": 6144,
        "layer_types": types,
        "max_position_embeddings": 131072,
        "num_attention_heads": 8,
        "num_hidden_layers": 35,
        "num_key_value_heads": 1,
        "num_kv_shared_layers": 20,
        "rms_norm_eps": 1e-6,
        "rope_parameters": {
            "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                               "rope_type": "proportional"},
            "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}
        },
        "sliding_window": 512,
        "tie_word_embeddings": true,
        "use_double_wide_mlp": true,
        "vocab_size": 262144,
        "vocab_size_per_layer_input": 262144
    })
}

fn composite(text: Value) -> String {
    json!({
        "architectures": ["Gemma4ForConditionalGeneration"],
        "model_type": "gemma4",
        "text_config": text,
        "vision_config": {"model_type": "gemma4_vision", "hidden_size": 768},
        "audio_config": {"model_type": "gemma4_audio", "hidden_size": 1024}
    })
    .to_string()
}

#[test]
fn the_composite_and_the_text_only_config_give_the_same_model() {
    let from_composite = hf_config(&composite(e2b_text())).unwrap();
    let mut text = e2b_text();
    text["architectures"] = json!(["Gemma4ForCausalLM"]);
    let from_text = hf_config(&text.to_string()).unwrap();
    assert_eq!(from_composite, from_text);
    let fields = HfConfig::parse(&composite(e2b_text())).unwrap();
    assert_eq!(
        hf_family(&fields).unwrap().hf_class(),
        Some("Gemma4ForConditionalGeneration")
    );
}

#[test]
fn e2b_layers_share_kv_with_the_last_producer_of_their_kind() {
    let c: ModelConfig = hf_config(&composite(e2b_text())).unwrap();
    assert_eq!(c.first_kv_shared_layer(), 15);
    // Layers 0..15: sliding except 4, 9, 14; the last sliding producer is 13, the last full 14.
    for layer in 15..35 {
        let full = (layer + 1) % 5 == 0;
        assert_eq!(
            c.kv_source(layer),
            Some(if full { 14 } else { 13 }),
            "{layer}"
        );
        assert_eq!(c.mlp_width_at(layer), 2 * 6144);
    }
    assert_eq!(c.kv_source(14), None);
    assert_eq!(c.mlp_width_at(14), 6144);
    let plan = ModelPlan::new(&c).unwrap();
    let Mixer::Attention(global) = &plan.layers[4].mixer else {
        panic!("layer 4 is attention")
    };
    assert_eq!((global.head_dim, global.num_kv_heads), (512, 1));
    // Proportional RoPE: 64 of 256 pairs turn, at theta^(-2i/512).
    assert_eq!(global.rope.inv_freq.len(), 256);
    assert_eq!(
        global.rope.inv_freq.iter().filter(|&&f| f > 0.0).count(),
        64
    );
    assert_eq!(global.rope.inv_freq[1], 1.0 / 1e6f32.powf(2.0 / 512.0));
    assert!(!global.values_are_keys && global.v_norm && global.scale == 1.0);
    let Mixer::Attention(sliding) = &plan.layers[0].mixer else {
        panic!("layer 0 is attention")
    };
    assert_eq!((sliding.head_dim, sliding.window), (256, Some(512)));
    assert_eq!(sliding.rope.inv_freq.len(), 128);
    // A consumer names no K/V tensors; every layer has its per-layer input and scalar.
    let consumer = &plan.layers[20];
    assert!(consumer.tensor(LayerTensor::AttnK).is_none());
    assert!(consumer.tensor(LayerTensor::AttnKNorm).is_none());
    assert!(consumer.tensor(LayerTensor::PerLayerInpGate).is_some());
    assert!(consumer.tensor(LayerTensor::LayerOutputScale).is_some());
    assert!(matches!(consumer.mlp, MlpSpec::Gated { width: 12288, .. }));
    let p = plan.per_layer_input.unwrap();
    assert_eq!((p.width, p.vocab_size, p.layers), (256, 262144, 35));
    assert_eq!(plan.final_logit_softcap, Some(30.0));
}

/// 26B-A4B: keys as values and 2 KV heads on global layers, the experts beside the MLP.
#[test]
fn a26b_global_layers_use_keys_as_values_and_experts_sit_beside_the_mlp() {
    let mut text = e2b_text();
    let types: Vec<&str> = (0..30)
        .map(|l| {
            if (l + 1) % 6 == 0 {
                "full_attention"
            } else {
                "sliding_attention"
            }
        })
        .collect();
    for (k, v) in [
        ("attention_k_eq_v", json!(true)),
        ("num_global_key_value_heads", json!(2)),
        ("num_key_value_heads", json!(8)),
        ("num_attention_heads", json!(16)),
        ("hidden_size", json!(2816)),
        ("intermediate_size", json!(2112)),
        ("num_hidden_layers", json!(30)),
        ("layer_types", json!(types)),
        ("hidden_size_per_layer_input", json!(0)),
        ("num_kv_shared_layers", json!(0)),
        ("use_double_wide_mlp", json!(false)),
        ("enable_moe_block", json!(true)),
        ("num_experts", json!(128)),
        ("top_k_experts", json!(8)),
        ("moe_intermediate_size", json!(704)),
    ] {
        text[k] = v;
    }
    let c = hf_config(&composite(text)).unwrap();
    let plan = ModelPlan::new(&c).unwrap();
    let Mixer::Attention(global) = &plan.layers[5].mixer else {
        panic!("attention")
    };
    assert_eq!((global.num_kv_heads, global.values_are_keys), (2, true));
    assert!(plan.layers[5].tensor(LayerTensor::AttnV).is_none());
    assert!(plan.layers[4].tensor(LayerTensor::AttnV).is_some());
    let layer = &plan.layers[0];
    let moe = layer
        .experts_beside
        .as_ref()
        .expect("experts beside the MLP");
    assert_eq!(
        (
            moe.num_experts,
            moe.experts_per_token,
            moe.expert_intermediate_size
        ),
        (128, 8, 704)
    );
    assert!(moe.norm_topk_prob);
    assert!(matches!(layer.mlp, MlpSpec::Gated { width: 2112, .. }));
    assert!(plan.per_layer_input.is_none());
}

#[test]
fn checkpoint_names_map_to_the_plans() {
    let family = hf_family(&HfConfig::parse(&composite(e2b_text())).unwrap()).unwrap();
    for (hf, canonical) in [
        (
            "model.language_model.layers.3.self_attn.q_proj.weight",
            Some("blk.3.attn_q.weight"),
        ),
        (
            "model.layers.3.post_attention_layernorm.weight",
            Some("blk.3.post_attention_norm.weight"),
        ),
        (
            "model.language_model.layers.0.layer_scalar",
            Some("blk.0.layer_output_scale.weight"),
        ),
        (
            "model.language_model.embed_tokens_per_layer.weight",
            Some("per_layer_token_embd.weight"),
        ),
        (
            "model.layers.1.router.per_expert_scale",
            Some("blk.1.ffn_down_exps.scale"),
        ),
        (
            "model.layers.1.experts.down_proj",
            Some("blk.1.ffn_down_exps.weight"),
        ),
        (
            "model.language_model.layers.2.per_layer_input_gate.weight",
            Some("blk.2.inp_gate.weight"),
        ),
        (
            "model.language_model.embed_tokens.weight",
            Some("token_embd.weight"),
        ),
        (
            "model.language_model.norm.weight",
            Some("output_norm.weight"),
        ),
        (
            "model.vision_tower.encoder.layers.0.mlp.gate_proj.linear.weight",
            None,
        ),
        ("model.embed_audio.embedding_projection.weight", None),
    ] {
        assert_eq!(family.hf_tensor_name(hf).as_deref(), canonical, "{hf}");
    }
}

#[test]
fn bidirectional_text_attention_is_refused() {
    let mut text = e2b_text();
    text["use_bidirectional_attention"] = json!("all");
    let err = hf_config(&composite(text)).unwrap_err().to_string();
    assert!(err.contains("use_bidirectional_attention"), "{err}");
}

/// The fixtures (fixtures/arch/gemma4: the text-only class; gemma4_moe: the hub's composite)
/// read the same from their config.json and from transformers' own save of it.
#[test]
fn the_fixtures_read_the_same_from_both_layouts() {
    for arch in ["gemma4", "gemma4_moe"] {
        let dir = crate::testing::repo_root().join("fixtures/arch").join(arch);
        let read = |file: &str| {
            let text = std::fs::read_to_string(dir.join(file)).unwrap();
            hf_config(&text).unwrap_or_else(|e| panic!("{arch} {file}: {e}"))
        };
        assert_eq!(
            read("config.json"),
            read("config.transformers5.json"),
            "{arch}"
        );
    }
}
