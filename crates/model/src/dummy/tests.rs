use super::*;

#[test]
fn presets_are_self_consistent() {
    for name in PRESET_NAMES {
        let c = preset(name).unwrap();
        assert_eq!(c.num_heads % c.num_kv_heads, 0, "{name}");
        assert_eq!(c.hidden_size % 8, 0, "{name}");
        assert_eq!(config_for(name).unwrap(), c);
    }
    assert!(preset("no-such-model").is_none());
    assert!(config_for("no-such-model").is_err());
}

#[test]
fn tensors_cover_every_weight_the_forward_pass_reads() {
    let tied = preset("tiny").unwrap();
    let inits = tensor_inits(&tied, 1);
    let per_layer = 12; // norm, q, k, v, 3 biases, o, norm, gate, up, down
    assert_eq!(inits.len(), 1 + tied.num_layers * per_layer + 1);
    let untied = ModelConfig {
        tie_word_embeddings: false,
        qkv_bias: false,
        ..tied
    };
    let names: Vec<String> = tensor_inits(&untied, 1)
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(names.contains(&"output.weight".to_string()));
    assert!(!names.iter().any(|n| n.ends_with(".bias")));
}

#[test]
fn values_are_deterministic_bounded_and_seed_dependent() {
    let c = preset("tiny").unwrap();
    let a = generate(&c, 7);
    let b = generate(&c, 7);
    let other = generate(&c, 8);
    let bytes = |w: &ModelWeights, n: &str| w.get(n).unwrap().storage.bytes().to_vec();
    assert_eq!(
        bytes(&a, "blk.1.ffn_up.weight"),
        bytes(&b, "blk.1.ffn_up.weight")
    );
    assert_ne!(
        bytes(&a, "blk.1.ffn_up.weight"),
        bytes(&other, "blk.1.ffn_up.weight")
    );

    let init = tensor_inits(&c, 7)
        .into_iter()
        .find(|t| t.name == "blk.0.attn_q.weight")
        .unwrap();
    let values: Vec<f32> = (0..init.len()).map(|i| init.value(i)).collect();
    let max = values.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    assert!(
        max <= MATRIX_SCALE * 1.01 && max > MATRIX_SCALE * 0.9,
        "{max}"
    );
    let mean = values.iter().sum::<f32>() / values.len() as f32;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / values.len() as f32;
    assert!(mean.abs() < 1e-3, "{mean}");
    assert!((var.sqrt() - 0.02).abs() < 1e-3, "std {}", var.sqrt());

    let norm = tensor_inits(&c, 7)
        .into_iter()
        .find(|t| t.name == "output_norm.weight")
        .unwrap();
    // bf16 spacing near 1 is 2^-7.
    assert!((0..norm.len()).all(|i| (norm.value(i) - 1.0).abs() <= NORM_SCALE + 1.0 / 128.0));
}

#[test]
fn serial_fill_equals_the_parallel_generator() {
    let c = preset("tiny").unwrap();
    let weights = generate(&c, 3);
    for init in tensor_inits(&c, 3).into_iter().take(5) {
        let mut bits = vec![0u16; init.len()];
        init.fill(&mut bits);
        let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
        assert_eq!(weights.get(&init.name).unwrap().storage.bytes(), &bytes[..]);
    }
}

/// bench/gpu/moe's configs (issue 13's H200 benchmark) parse to the shapes its README states:
/// the MoE model, and the dense model with the same active parameter count.
#[test]
fn the_moe_benchmark_configs_parse_to_their_stated_shapes() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/gpu/moe");
    let moe = config_for(dir.join("qwen3-30b-a3b.json").to_str().unwrap()).unwrap();
    let m = moe.moe.as_ref().expect("a mixture of experts");
    assert_eq!(
        (
            m.num_experts,
            m.experts_per_token,
            m.expert_intermediate_size
        ),
        (128, 8, 768)
    );
    assert!(m.norm_topk_prob && (0..48).all(|l| m.is_sparse(l)));
    assert_eq!(
        (
            moe.num_layers,
            moe.hidden_size,
            moe.num_heads,
            moe.num_kv_heads
        ),
        (48, 2048, 32, 4)
    );
    assert!(moe.block.qk_norm && !moe.tie_word_embeddings);
    let dense = config_for(dir.join("qwen3-30b-a3b-dense.json").to_str().unwrap()).unwrap();
    assert!(dense.moe.is_none());
    assert_eq!(
        dense.intermediate_size,
        m.experts_per_token * m.expert_intermediate_size
    );
    assert_eq!(
        (
            dense.num_layers,
            dense.hidden_size,
            dense.head_dim,
            dense.vocab_size
        ),
        (
            moe.num_layers,
            moe.hidden_size,
            moe.head_dim,
            moe.vocab_size
        )
    );
}
