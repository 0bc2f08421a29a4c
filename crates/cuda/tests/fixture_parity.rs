//! Issue 12's GPU check: the random-weight Hugging Face checkpoints of fixtures/arch (llama
//! with Llama 3 rope scaling, qwen2, qwen3, mistral with a sliding window, gemma3, and the
//! mixtures of experts qwen3_moe, qwen2_moe with its shared expert, mixtral, gpt-oss with
//! bf16 and with MXFP4 experts (and its GGUF copy), and the linear-attention hybrids
//! qwen3_5, qwen3_5_moe, qwen3_next), loaded from
//! their directories into both backends, give the CPU's greedy tokens on CUDA within the
//! CPU/CUDA parity tolerances of tests/parity.rs: logits relative error <= 2e-2 at every step (0.1 for the
//! hybrids, see common::compare::near_tie_gap),
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
use ferrite_engine::Backend;
use ferrite_model::config::ModelConfig;
use ferrite_model::gguf::GgufFile;
use ferrite_model::load;
use ferrite_model::weights::ModelWeights;
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
    check_model(arch, config, cpu_weights, gpu_weights);
}

/// The fixture's GGUF copy (llama.cpp's converter) through both backends.
fn check_gguf(arch: &str) {
    let Some(_) = common::gpu(&format!("fixture parity {arch} GGUF")) else {
        return;
    };
    let gguf = GgufFile::open(&fixture_dir(arch).join("model.gguf")).unwrap();
    let (config, cpu_weights) = gguf.model().unwrap_or_else(|e| panic!("{arch}: {e}"));
    let (_, gpu_weights) = gguf.model().unwrap();
    check_model(&format!("{arch} GGUF"), config, cpu_weights, gpu_weights);
}

fn check_model(
    arch: &str,
    config: ModelConfig,
    cpu_weights: ModelWeights,
    gpu_weights: ModelWeights,
) {
    let name = arch.trim_end_matches(" GGUF");
    let mut cpu = CpuBackend::new(config.clone(), cpu_weights, 2).unwrap();
    let options = test_options(false, true);
    let mut gpu = CudaBackend::new(config.clone(), WeightSource::Host(gpu_weights), options)
        .unwrap_or_else(|e| panic!("{arch} on CUDA: {e:#}"));
    if gpu.state_bytes_per_sequence() > 0 {
        // A hybrid: one recurrent-state slot each, before the KV caches (CUDA's graphs
        // capture the state's address).
        cpu.init_state_slots(1).unwrap();
        gpu.init_state_slots(1).unwrap();
    }
    if config.linear_attention.is_some() {
        return check_hybrid(arch, &mut cpu, &mut gpu, config.moe.is_some());
    }
    let (mut worst, mut near_ties, mut same_as_reference, mut steps) = (0.0f64, 0, 0, 0);
    // A mixture of experts may flip an expert at a router near-tie (common::compare::Run's
    // `outliers`): a few rows of its 64 past the tolerance (measured: docs/performance.md,
    // '2026-12-05 12:24-12:25 UTC' and '13:11-13:14 UTC').
    let mut outliers_left = if config.moe.is_some() { 3 } else { 0 };
    let (tolerance, gap_bar) = (row_tolerance(name), 0.05);
    let outlier_max = outlier_cap(name);
    let cases = prompts(name);
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
                if e > tolerance && e <= outlier_max && outliers_left > 0 {
                    outliers_left -= 1;
                    println!("  {arch} routing outlier: prompt {p} position {at}, {e:.3e}");
                } else {
                    assert!(
                        e <= tolerance,
                        "{arch} prompt {p} position {at}: logits relative error {e:.3e} > \
                         {tolerance:.0e}"
                    );
                }
                let (ta, tb) = (s.cpu_token, s.cuda_token);
                if ta != tb {
                    let gap = (s.cpu[ta as usize] - s.cpu[tb as usize]).abs();
                    assert!(
                        gap < gap_bar,
                        "{arch} prompt {p} position {at}: greedy CPU {ta} vs CUDA {tb}, CPU logit \
                     gap {gap} >= {gap_bar}"
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
fn qwen3_5_hybrid_fixture_on_cuda_matches_the_cpu() {
    check_arch("qwen3_5");
}

#[test]
fn qwen3_5_moe_hybrid_fixture_on_cuda_matches_the_cpu() {
    check_arch("qwen3_5_moe");
}

#[test]
fn qwen3_next_hybrid_fixture_on_cuda_matches_the_cpu() {
    check_arch("qwen3_next");
}

#[test]
fn qwen35_gguf_with_tiled_value_heads_on_cuda_matches_the_cpu() {
    check_gguf("qwen3_5");
}

/// How far transformers' own bf16 run of each hybrid fixture is from its f32 reference, mean
/// |Δ logprob| over the prompts (scripts/make_arch_fixtures.py's measurement, 2026-12-06): these
/// random-weight hybrids are ill-conditioned for bf16 (the attention fixtures: 0.04-0.09), so
/// per-row bars that hold for attention models do not hold here, while the kernels themselves
/// match a host reference to bf16 rounding (tests/gated_deltanet.rs).
fn bf16_sensitivity(arch: &str) -> f64 {
    match arch.trim_end_matches(" GGUF") {
        "qwen3_next" => 0.11,
        "qwen3_5" => 0.40,
        "qwen3_5_moe" => 0.18,
        other => panic!("no bf16 measurement for {other}"),
    }
}

/// The logits' relative error a row may have: 2e-2, set on the attention fixtures, which
/// transformers' own bf16 run moves by 0.04-0.09 mean |Δ logprob| (fixtures/arch/README.md);
/// twice that for gpt-oss's, which it moves twice as far as qwen3_moe's (0.231 against 0.117,
/// and mixtral's 0.071: scripts/make_arch_fixtures.py's "transformers in bf16 vs the f32
/// reference", 2026-12-06), its top-2-of-8 routing and sinks amplifying bf16 rounding (its
/// kernels match host references exactly or to bf16 rounding: tests/moe_mxfp4.rs,
/// tests/attention.rs).
fn row_tolerance(arch: &str) -> f64 {
    if arch.starts_with("gpt_oss") {
        4e-2
    } else {
        2e-2
    }
}

/// How far a row whose router flipped an expert may go: OUTLIER_MAX, measured on top-4..8
/// routings; 1 for gpt-oss, whose top-2 of 8 gives a flipped expert half a token's MLP. The
/// MXFP4 fixture's two outliers (0.18 and 0.34, measured 2026-12-06 on an H100) follow rows where
/// transformers' f32 router puts the 2nd and 3rd expert 0.0019 and 0.0106 apart (layer 2 at
/// prompt 2's position 81 and prompt 3's 102), within bf16's rounding of the router's input.
fn outlier_cap(arch: &str) -> f64 {
    if arch.starts_with("gpt_oss") {
        1.0
    } else {
        OUTLIER_MAX
    }
}

/// A hybrid on both backends along the CPU's greedy continuation: CUDA's |Δ logprob| of the
/// CPU's token, averaged, within what bf16 costs transformers on the same fixture; every row
/// finite and within OUTLIER_MAX (a mixture of experts' rows may flip an expert: within 1).
fn check_hybrid(arch: &str, cpu: &mut CpuBackend, gpu: &mut CudaBackend, experts: bool) {
    let name = arch.trim_end_matches(" GGUF");
    let row_cap = if experts { 1.0 } else { OUTLIER_MAX };
    let log_softmax_at = |row: &[f32], token: u32| {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
        row[token as usize] as f64 - max - sum.ln()
    };
    let (mut sum, mut worst, mut steps, mut same, mut same_as_reference) = (0.0, 0.0f64, 0, 0, 0);
    for (prompt, reference) in prompts(name) {
        teacher_forced(cpu, gpu, &prompt, reference.len(), PAGE_SIZE, |s| {
            assert!(
                s.rel_err <= row_cap,
                "{arch} position {}: logits relative error {:.3e}",
                s.at,
                s.rel_err
            );
            worst = worst.max(s.rel_err);
            sum += (log_softmax_at(s.cuda, s.cpu_token) - log_softmax_at(s.cpu, s.cpu_token)).abs();
            same += usize::from(s.cpu_token == s.cuda_token);
            same_as_reference += usize::from(s.cuda_token == reference[s.at - prompt.len()]);
            steps += 1;
        });
    }
    let mean = sum / steps as f64;
    let bar = bf16_sensitivity(arch);
    println!(
        "fixture {arch} on CUDA: {steps} greedy steps, mean |Δ logprob| {mean:.3e} vs the CPU \
         (transformers' own bf16 run: {bar}), worst logits rel err {worst:.2e}, CUDA's token = \
         CPU's at {same}/{steps}, = transformers' at {same_as_reference}/{steps}"
    );
    assert!(mean <= bar, "{arch}: mean |Δ logprob| {mean} > {bar}");
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

/// Attention sinks, alternating 8-token windows, YaRN, biases on attention and experts, the
/// clamped SwiGLU; bf16 experts.
#[test]
fn gpt_oss_fixture_on_cuda_matches_the_cpu() {
    check_arch("gpt_oss");
}

/// The same with MXFP4 experts, kept MXFP4 on the GPU: its weights take at most 1.05x the
/// checkpoint's bytes there (issue 38's bar).
#[test]
fn gpt_oss_mxfp4_fixture_on_cuda_matches_the_cpu() {
    check_arch("gpt_oss_mxfp4");
    let Some(_) = common::gpu("gpt_oss_mxfp4 memory") else {
        return;
    };
    let dir = fixture_dir("gpt_oss_mxfp4");
    let (config, weights) = load::hf_dir(&dir).unwrap();
    let gpu = CudaBackend::new(
        config,
        WeightSource::Host(weights),
        test_options(false, true),
    )
    .unwrap();
    let file = std::fs::metadata(dir.join("model.safetensors"))
        .unwrap()
        .len() as f64;
    let ratio = gpu.weight_bytes() as f64 / file;
    println!(
        "gpt_oss_mxfp4: {} weight bytes on the GPU, {file} in the checkpoint: {ratio:.3}x",
        gpu.weight_bytes()
    );
    assert!(
        ratio <= 1.05,
        "gpt_oss_mxfp4 weights take {ratio:.3}x the checkpoint on the GPU"
    );
}

#[test]
fn gpt_oss_mxfp4_gguf_on_cuda_matches_the_cpu() {
    check_gguf("gpt_oss_mxfp4");
}
