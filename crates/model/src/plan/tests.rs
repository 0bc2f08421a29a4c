use super::*;
use crate::config::{LayerAttention, MoeConfig};
use crate::dummy::preset;

fn names(tensors: &[TensorSpec]) -> Vec<String> {
    tensors.iter().map(|t| t.name.clone()).collect()
}

#[test]
fn qwen2_layers_have_biases_and_a_tied_head() {
    let c = preset("qwen2.5-0.5b").unwrap();
    let plan = ModelPlan::new(&c).unwrap();
    assert_eq!(plan.layers.len(), 24);
    let tensors = plan.tensors();
    // embedding + 24 x (norm, q, k, v, 3 biases, o, norm, gate, up, down) + final norm
    assert_eq!(tensors.len(), 1 + 24 * 12 + 1);
    let layer = &plan.layers[3];
    let q = layer.required(LayerTensor::AttnQ).unwrap();
    assert_eq!(
        (q.name.as_str(), q.shape.clone()),
        ("blk.3.attn_q.weight", vec![896, 896])
    );
    let k_bias = layer.required(LayerTensor::AttnKBias).unwrap();
    assert_eq!(
        (k_bias.shape.clone(), k_bias.role),
        (vec![128], TensorRole::Bias)
    );
    let down = layer.required(LayerTensor::FfnDown).unwrap();
    assert_eq!((down.rows(), down.cols()), (896, 4864));
    assert!(layer.tensor(LayerTensor::AttnQNorm).is_none());
    assert!(layer.required(LayerTensor::FfnGateExps).is_err());
    assert!(!names(&tensors).contains(&OUTPUT.to_string()));
    let Mixer::Attention(a) = &layer.mixer else {
        panic!("an attention layer")
    };
    assert_eq!((a.group(), a.rope.inv_freq.len()), (7, 32));
    assert_eq!(a.rope.inv_freq, c.rope_inv_freq(3));
}

#[test]
fn gemma_style_switches_add_their_norms_and_windows() {
    let mut c = preset("tiny").unwrap();
    c.qkv_bias = false;
    c.tie_word_embeddings = false;
    c.block.qk_norm = true;
    c.block.post_norms = true;
    c.block.norm_weight_offset = 1.0;
    c.layer_attention = vec![
        LayerAttention {
            sliding_window: Some(16),
            rope_theta: 10_000.0,
            rope_scaled: false,
        },
        LayerAttention {
            sliding_window: None,
            rope_theta: 1e6,
            rope_scaled: true,
        },
    ];
    let plan = ModelPlan::new(&c).unwrap();
    assert_eq!(plan.norm.weight_offset, 1.0);
    let layer0 = names(&plan.layers[0].tensors());
    for t in [
        LayerTensor::AttnQNorm,
        LayerTensor::PostAttentionNorm,
        LayerTensor::PostFfwNorm,
    ] {
        assert!(layer0.contains(&t.of(0)), "{t:?}");
    }
    let windows: Vec<_> = plan
        .layers
        .iter()
        .map(|l| match &l.mixer {
            Mixer::Attention(a) => a.window,
            Mixer::LinearAttention(_) => panic!("no linear layers here"),
        })
        .collect();
    assert_eq!(windows, [Some(16), None]);
    let (Mixer::Attention(a0), Mixer::Attention(a1)) =
        (&plan.layers[0].mixer, &plan.layers[1].mixer)
    else {
        panic!("attention layers")
    };
    assert_ne!(a0.rope.inv_freq, a1.rope.inv_freq);
    assert_eq!(names(&plan.tensors()).last().unwrap(), OUTPUT);
}

#[test]
fn sparse_layers_read_the_router_and_stacked_experts() {
    let mut c = preset("tiny").unwrap();
    c.moe = Some(MoeConfig {
        num_experts: 8,
        experts_per_token: 2,
        expert_intermediate_size: 96,
        norm_topk_prob: true,
        shared_expert_intermediate_size: Some(64),
        sparse_layers: vec![false, true],
        biases: false,
    });
    let plan = ModelPlan::new(&c).unwrap();
    assert!(matches!(
        plan.layers[0].mlp,
        MlpSpec::Gated { width: 1024, .. }
    ));
    assert!(matches!(&plan.layers[1].mlp, MlpSpec::Experts { moe, .. } if moe.num_experts == 8));
    let down = plan.layers[1].required(LayerTensor::FfnDownExps).unwrap();
    assert_eq!(down.shape, [8, 384, 96]);
    let shared_gate = plan.layers[1]
        .required(LayerTensor::FfnGateInpShexp)
        .unwrap();
    assert_eq!(shared_gate.shape, [1, 384]);
    assert!(plan.layers[1].tensor(LayerTensor::FfnGate).is_none());
}

#[test]
fn contradictory_shapes_have_no_plan() {
    let mut c = preset("tiny").unwrap();
    c.num_kv_heads = 4; // 6 heads cannot share 4 KV heads
    assert!(ModelPlan::new(&c).is_err());
}
