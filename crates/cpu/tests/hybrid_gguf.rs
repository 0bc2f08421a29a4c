//! The linear-attention hybrids from GGUF (issue 37): fixtures/arch/{qwen3_next, qwen3_5,
//! qwen3_5_moe}/model.gguf, written from the checkpoints by llama.cpp's own converter
//! (scripts/make_hybrid_gguf_fixtures.py: norms with their `+ 1` folded in, `A = -exp(A_log)`,
//! gated attention's query and gate rows interleaved per head, `qwen35` value heads in tiled
//! order, `qwen3next`'s beta and alpha grouped per key head). Loaded through the family's
//! GGUF reading, each must give the checkpoint's shape and, on the same bf16 weights, the
//! checkpoint's log-probabilities (float order aside) and transformers' (the fixture's
//! reference), greedy continuations included; batched and chunked runs stay bitwise equal.

mod common;

use common::*;
use ferrite_cpu::CpuBackend;
use ferrite_model::gguf::GgufFile;
use ferrite_model::load;
use serde_json::Value;

const PAGE_SIZE: usize = 16;

struct Case {
    prompt: Vec<u32>,
    logprobs: Vec<Option<f64>>,
    greedy: Vec<u32>,
}

fn cases(arch: &str) -> Vec<Case> {
    let path = repo_root()
        .join("fixtures/arch")
        .join(arch)
        .join("reference.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| Case {
            prompt: ids(&p["ids"]),
            logprobs: p["prompt_logprobs"]
                .as_array()
                .unwrap()
                .iter()
                .map(Value::as_f64)
                .collect(),
            greedy: ids(&p["greedy"]),
        })
        .collect()
}

fn check(arch: &str) {
    let dir = repo_root().join("fixtures/arch").join(arch);
    let gguf = GgufFile::open(&dir.join("model.gguf")).unwrap();
    let (config, weights) = gguf.model().unwrap_or_else(|e| panic!("{arch}: {e}"));
    let (hf_config, hf_weights) = load::hf_dir(&dir).unwrap();
    let (g, h) = (
        config.linear_attention.clone().unwrap(),
        hf_config.linear_attention.clone().unwrap(),
    );
    assert_eq!(
        (
            g.layers,
            g.num_key_heads,
            g.num_value_heads,
            g.key_head_dim,
            g.value_head_dim
        ),
        (
            h.layers,
            h.num_key_heads,
            h.num_value_heads,
            h.key_head_dim,
            h.value_head_dim
        ),
        "{arch}"
    );
    assert_eq!(g.tiled_value_heads, arch != "qwen3_next", "{arch}");
    assert_eq!(config.rotary_dim(), hf_config.rotary_dim(), "{arch}");
    assert_eq!(config.moe, hf_config.moe, "{arch}");
    // The converter folds the norms' `+ 1` into the file.
    assert_eq!(
        (
            config.block.norm_weight_offset,
            hf_config.block.norm_weight_offset
        ),
        (0.0, 1.0)
    );
    let mut from_gguf = CpuBackend::new(config, weights, 2).unwrap();
    let mut from_hf = CpuBackend::new(hf_config, hf_weights, 2).unwrap();
    let cases = cases(arch);
    let (mut vs_hf, mut vs_reference, mut count) = (0.0f64, 0.0f64, 0);
    for case in &cases {
        let (a, b) = (
            prompt_logprobs(&mut from_gguf, &case.prompt, PAGE_SIZE),
            prompt_logprobs(&mut from_hf, &case.prompt, PAGE_SIZE),
        );
        for (i, (a, b)) in a.iter().zip(&b).enumerate() {
            vs_hf += (a - b).abs();
            vs_reference += (a - case.logprobs[i + 1].expect("reference")).abs();
            count += 1;
        }
        let got = greedy(&mut from_gguf, &case.prompt, case.greedy.len(), PAGE_SIZE);
        assert_eq!(got, case.greedy, "{arch}: greedy from GGUF");
    }
    let (vs_hf, vs_reference) = (vs_hf / count as f64, vs_reference / count as f64);
    println!(
        "{arch} GGUF: mean |Δ logprob| {vs_hf:.2e} vs the checkpoint, {vs_reference:.2e} vs \
         transformers over {count} tokens; greedy identical {}/{}",
        cases.len(),
        cases.len()
    );
    assert!(vs_hf <= 1e-5, "{arch}: {vs_hf} from the checkpoint's");
    assert!(
        vs_reference <= 1e-4,
        "{arch}: {vs_reference} from transformers'"
    );
    // Mixed batches and chunks against each sequence alone.
    let seqs: Vec<Vec<u32>> = cases
        .iter()
        .map(|c| c.prompt.iter().chain(&c.greedy).copied().collect())
        .collect();
    let alone = run_schedule(
        &mut from_gguf,
        PAGE_SIZE,
        &seqs,
        &chunked_schedule(&seqs, usize::MAX),
    );
    let mixed = run_schedule(&mut from_gguf, PAGE_SIZE, &seqs, &mixed_schedule(&seqs, 12));
    assert_bitwise_equal(&alone, &mixed, &format!("{arch} GGUF: mixed batch"));
}

#[test]
fn qwen35_gguf_with_tiled_value_heads_matches_the_checkpoint() {
    check("qwen3_5");
}

#[test]
fn qwen35moe_gguf_matches_the_checkpoint() {
    check("qwen3_5_moe");
}

#[test]
fn qwen3next_gguf_with_grouped_beta_alpha_matches_the_checkpoint() {
    check("qwen3_next");
}
