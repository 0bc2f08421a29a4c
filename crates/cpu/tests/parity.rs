//! Greedy parity with Hugging Face transformers (float32, same GGUF) on the fixtures made by
//! scripts/make_reference_fixtures.py, plus SmolLM2 throughput (printed, `--nocapture`).
//!
//! A case may diverge only at a step whose reference top-1/top-2 margin is below 0.25: there
//! the two float orders legitimately pick different tokens, and everything after is moot.

mod common;

use std::time::Instant;

use common::{argmax, floats, greedy, model_path, repo_root};
use ferrite_cpu::CpuBackend;
use ferrite_engine::{Backend, LogitsRequest, SeqBatch};
use ferrite_model::gguf::GgufFile;

const MIN_MARGIN: f64 = 0.25;
const PAGE_SIZE: usize = 16;

pub fn load_backend(file: &str) -> CpuBackend {
    let gguf = GgufFile::open(&model_path(file)).unwrap();
    CpuBackend::new(gguf.config().unwrap(), gguf.weights(), 2).unwrap()
}

fn check_fixture(fixture: &str) {
    check_fixture_on(fixture, false)
}

/// `int8`: with `--int8-activations` (the Q4_K and Q6_K matrices multiply int8 activations).
fn check_fixture_on(fixture: &str, int8: bool) {
    if int8 && !ferrite_cpu::kernels::int8_support::available() {
        eprintln!("skipped: int8 activations need AVX-512 VNNI, which this CPU lacks");
        return;
    }
    let path = repo_root().join("fixtures/reference").join(fixture);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run scripts/make_reference_fixtures.py)",
            path.display()
        )
    });
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut backend = load_backend(doc["model_file"].as_str().unwrap());
    if int8 {
        backend.use_int8_activations().unwrap();
    }
    let ids = |v: &serde_json::Value| -> Vec<u32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    let (mut exact, mut diverged) = (0, Vec::new());
    for case in doc["generate"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let prompt = ids(&case["prompt_ids"]);
        let expected = ids(&case["greedy_ids"]);
        let margins = floats(&case["margins"]);
        let got = greedy(&mut backend, &prompt, expected.len(), PAGE_SIZE);
        match got.iter().zip(&expected).position(|(g, e)| g != e) {
            None => exact += 1,
            Some(step) => {
                assert!(
                    margins[step] < MIN_MARGIN,
                    "{fixture} case `{name}`: step {step} gave {} where transformers gave {} \
                     (margin {:.3} >= {MIN_MARGIN})\n  got      {got:?}\n  expected {expected:?}",
                    got[step],
                    expected[step],
                    margins[step]
                );
                diverged.push(format!(
                    "{name} at step {step} (margin {:.3})",
                    margins[step]
                ));
            }
        }
    }
    println!(
        "{fixture}: {exact} cases identical for all tokens; diverged at low margin: {diverged:?}"
    );
}

#[test]
fn smollm2_greedy_matches_transformers() {
    check_fixture("smollm2.json");
}

#[test]
fn qwen2_5_coder_greedy_matches_transformers() {
    check_fixture("qwen2.5-coder-0.5b.json");
}

/// `--int8-activations` changes answers (it is opt-in for that), but no further than the
/// float orders do: a divergence only where transformers' own margin is below 0.25.
#[test]
fn qwen2_5_coder_int8_activations_diverge_only_at_low_margins() {
    check_fixture_on("qwen2.5-coder-0.5b.json", true);
}

#[test]
fn gemma3_270m_int8_activations_diverge_only_at_low_margins() {
    check_fixture_on("gemma3-270m.json", true);
}

#[test]
fn smollm2_throughput() {
    let mut backend = load_backend("SmolLM2-135M-Instruct.Q4_1.gguf");
    let prompt: Vec<u32> = (0..256u32).map(|i| 100 + (i * 37) % 20000).collect();
    let decodes = 64;
    let pages = (prompt.len() + decodes + 1).div_ceil(PAGE_SIZE);
    backend.init_kv_cache(pages, PAGE_SIZE).unwrap();
    let table: Vec<u32> = (0..pages as u32).collect();
    let run = |backend: &mut CpuBackend, tokens: &[u32], start| {
        let batch = [SeqBatch {
            tokens,
            start_pos: start,
            block_table: &table,
            window_table: &[],
            state_slot: None,
            state_copy: Default::default(),
            logits: LogitsRequest::Last,
        }];
        argmax(backend.forward(&batch).unwrap().row(0))
    };
    let t = Instant::now();
    let mut next = run(&mut backend, &prompt, 0);
    let prefill = prompt.len() as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    for i in 0..decodes {
        next = run(&mut backend, &[next], prompt.len() + i);
    }
    let decode = decodes as f64 / t.elapsed().as_secs_f64();
    println!(
        "SmolLM2-135M Q4_1, 2 threads: prefill {prefill:.1} tok/s ({} tokens), decode {decode:.1} tok/s ({decodes} steps{})",
        prompt.len(),
        if cfg!(debug_assertions) { ", dev profile: use --release for real numbers" } else { "" }
    );
}

/// Gemma 3 270M (base, Q4_K_M): a second architecture family from a real GGUF file (sliding
/// and global layers, GeGLU, sandwich norms, Q/K norms). Text cases only: the file has no
/// chat template.
#[test]
fn gemma3_270m_greedy_matches_transformers() {
    check_fixture("gemma3-270m.json");
}
