//! Issue 12's GPU check: the random-weight Hugging Face checkpoints of fixtures/arch (llama
//! with Llama 3 rope scaling, qwen2, qwen3, mistral with a sliding window, gemma3, and the
//! mixtures of experts qwen3_moe, qwen2_moe with its shared expert, mixtral), loaded from
//! their directories into both backends, give the CPU's greedy tokens on CUDA within the
//! CPU/CUDA parity tolerances of tests/parity.rs: logits relative error <= 2e-2 at every step,
//! and the same argmax unless the CPU's top two are within 0.05 of each other. The CPU is the
//! oracle (it matches transformers on these files: crates/cpu/tests/arch_parity.rs); how often
//! CUDA's tokens also equal transformers' is printed.
//!
//! Run from the repository root, or from the source tree the test was built in.

mod common;

use std::path::PathBuf;

use common::compare::OUTLIER_MAX;
use common::fixtures::{fixture_path, ids, test_options};
use common::teacher_forced::teacher_forced;

use ferrite_cpu::CpuBackend;
use ferrite_cuda::{CudaBackend, WeightSource};
use ferrite_model::load;
use serde_json::Value;

const PAGE_SIZE: usize = 16;

fn fixture_dir(arch: &str) -> PathBuf {
    fixture_path("arch").join(arch)
}

/// (prompt ids, transformers' greedy ids) of each reference prompt.
fn prompts(arch: &str) -> Vec<(Vec<u32>, Vec<u32>)> {
    let text = std::fs::read_to_string(fixture_dir(arch).join("reference.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    doc["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (ids(&p["ids"]), ids(&p["greedy"])))
        .collect()
}

fn check_arch(arch: &str) {
    let Some(_) = common::gpu(&format!("fixture parity {arch}")) else {
        return;
    };
    let dir = fixture_dir(arch);
    let (config, cpu_weights) = load::hf_dir(&dir).unwrap_or_else(|e| panic!("{arch}: {e}"));
    let (_, gpu_weights) = load::hf_dir(&dir).unwrap();
    let mut cpu = CpuBackend::new(config.clone(), cpu_weights, 2).unwrap();
    let options = test_options(false, true);
    let mut gpu = CudaBackend::new(config.clone(), WeightSource::Host(gpu_weights), options)
        .unwrap_or_else(|e| panic!("{arch} on CUDA: {e:#}"));
    let (mut worst, mut near_ties, mut same_as_reference, mut steps) = (0.0f64, 0, 0, 0);
    // A mixture of experts may flip an expert at a router near-tie (common::compare::Run's
    // `outliers`): a few rows of its 64 past the tolerance (measured: docs/performance.md,
    // '2026-12-05 12:24-12:25 UTC' and '13:11-13:14 UTC').
    let mut outliers_left = if config.moe.is_some() { 3 } else { 0 };
    let cases = prompts(arch);
    for (p, (prompt, reference)) in cases.iter().enumerate() {
        teacher_forced(
            &mut cpu,
            &mut gpu,
            prompt,
            reference.len(),
            PAGE_SIZE,
            |s| {
                let e = s.rel_err;
                worst = worst.max(e);
                let at = s.at;
                if e > 2e-2 && e <= OUTLIER_MAX && outliers_left > 0 {
                    outliers_left -= 1;
                    println!("  {arch} routing outlier: prompt {p} position {at}, {e:.3e}");
                } else {
                    assert!(
                        e <= 2e-2,
                        "{arch} prompt {p} position {at}: logits relative error {e:.3e} > 2e-2"
                    );
                }
                let (ta, tb) = (s.cpu_token, s.cuda_token);
                if ta != tb {
                    let gap = (s.cpu[ta as usize] - s.cpu[tb as usize]).abs();
                    assert!(
                        gap < 0.05,
                        "{arch} prompt {p} position {at}: greedy CPU {ta} vs CUDA {tb}, CPU logit \
                     gap {gap} >= 0.05"
                    );
                    near_ties += 1;
                }
                if tb == reference[at - prompt.len()] {
                    same_as_reference += 1;
                }
                steps += 1;
            },
        );
    }
    println!(
        "fixture {arch} hd={} on CUDA: {steps} greedy steps over {} prompts, worst logits rel \
         err {worst:.2e} vs the CPU, {near_ties} near-tie mismatches; CUDA's token = \
         transformers' at {same_as_reference}/{steps} steps",
        config.head_dim,
        cases.len()
    );
}

#[test]
fn llama3_fixture_on_cuda_matches_the_cpu() {
    check_arch("llama");
}

#[test]
fn qwen2_fixture_on_cuda_matches_the_cpu() {
    check_arch("qwen2");
}

#[test]
fn qwen3_fixture_on_cuda_matches_the_cpu() {
    check_arch("qwen3");
}

#[test]
fn mistral_fixture_on_cuda_matches_the_cpu() {
    check_arch("mistral");
}

#[test]
fn gemma3_fixture_on_cuda_matches_the_cpu() {
    check_arch("gemma3");
}

#[test]
fn qwen3_moe_fixture_on_cuda_matches_the_cpu() {
    check_arch("qwen3_moe");
}

#[test]
fn qwen2_moe_fixture_on_cuda_matches_the_cpu() {
    check_arch("qwen2_moe");
}

#[test]
fn mixtral_fixture_on_cuda_matches_the_cpu() {
    check_arch("mixtral");
}
