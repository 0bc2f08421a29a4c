//! gpt-oss from GGUF (issue 38): fixtures/arch/gpt_oss_mxfp4/model.gguf, written from the MXFP4
//! checkpoint by llama.cpp's own converter (scripts/make_gpt_oss_gguf_fixture.py: MXFP4 experts
//! re-laid into GGML blocks with gate and up split, biases split alike, sinks as
//! `attn_sinks.weight`, YaRN as `rope.scaling.*`). Read through the family's GGUF path it must
//! give the checkpoint's config and, on the same weights, the checkpoint's log-probabilities
//! and greedy continuations, and transformers' log-probabilities (the fixture's reference).

mod common;

use common::*;
use ferrite_cpu::CpuBackend;
use ferrite_model::gguf::GgufFile;
use ferrite_model::load;
use ferrite_model::quant::DType;
use serde_json::Value;

const PAGE_SIZE: usize = 16;

#[test]
fn gpt_oss_gguf_with_mxfp4_experts_matches_the_checkpoint() {
    let dir = repo_root().join("fixtures/arch/gpt_oss_mxfp4");
    let gguf = GgufFile::open(&dir.join("model.gguf")).unwrap();
    let (config, weights) = gguf.model().unwrap();
    let (hf_config, hf_weights) = load::hf_dir(&dir).unwrap();
    assert_eq!(config.moe, hf_config.moe);
    assert_eq!(config.block, hf_config.block);
    assert_eq!(config.rope_scaling, hf_config.rope_scaling);
    assert_eq!(config.layer_attention, hf_config.layer_attention);
    assert_eq!(
        weights.get("blk.0.ffn_gate_exps.weight").unwrap().dtype,
        DType::Mxfp4
    );
    let mut from_gguf = CpuBackend::new(config, weights, 2).unwrap();
    let mut from_hf = CpuBackend::new(hf_config, hf_weights, 2).unwrap();
    let path = dir.join("reference.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let (mut vs_hf, mut vs_reference, mut count) = (0.0f64, 0.0f64, 0);
    for p in doc["prompts"].as_array().unwrap() {
        let prompt = ids(&p["ids"]);
        let reference: Vec<f64> = p["prompt_logprobs"]
            .as_array()
            .unwrap()
            .iter()
            .skip(1)
            .map(|v| v.as_f64().unwrap())
            .collect();
        let (a, b) = (
            prompt_logprobs(&mut from_gguf, &prompt, PAGE_SIZE),
            prompt_logprobs(&mut from_hf, &prompt, PAGE_SIZE),
        );
        for ((a, b), r) in a.iter().zip(&b).zip(&reference) {
            vs_hf += (a - b).abs();
            vs_reference += (a - r).abs();
            count += 1;
        }
        let n = ids(&p["greedy"]).len();
        assert_eq!(
            greedy(&mut from_gguf, &prompt, n, PAGE_SIZE),
            greedy(&mut from_hf, &prompt, n, PAGE_SIZE),
            "greedy from GGUF vs from the checkpoint"
        );
    }
    let (vs_hf, vs_reference) = (vs_hf / count as f64, vs_reference / count as f64);
    println!(
        "gpt-oss GGUF: mean |Δ logprob| {vs_hf:.2e} vs the checkpoint, {vs_reference:.2e} vs \
         transformers over {count} tokens"
    );
    assert!(vs_hf <= 1e-5, "{vs_hf} from the checkpoint's");
    assert!(vs_reference <= 1e-4, "{vs_reference} from transformers'");
}
