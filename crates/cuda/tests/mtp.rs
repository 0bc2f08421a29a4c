//! Qwen3.5's multi-token-prediction layer on CUDA against the CPU backend on the same weights
//! (the qwen3_5 fixture with its random MTP layer, scripts/make_mtp_fixture.py; the CPU's own
//! test holds it against transformers): at every position of the reference prompts, the
//! target's step over the prompt so far (whose catch-up writes the layer's K/V for the pairs
//! before), a first draft step from the target's hidden state, and a second from the layer's
//! own output. Both backends' log-probabilities of every vocabulary entry are compared.

mod common;

use common::fixtures::{fixture_path, ids, test_options};
use ferrite_cpu::CpuBackend;
use ferrite_cuda::{CudaBackend, WeightSource};
use ferrite_engine::{Backend, HeadDraftStep, LogitsRequest, SeqBatch};
use ferrite_model::load;

/// Mean |Δ logprob| CUDA (bf16) may keep from the CPU (f32) per draft row: this fixture's
/// random bf16 weights amplify rounding (the target alone: 6.2e-2 in fixture_parity). A
/// wrong row, position, norm or K/V moves log-probabilities by whole units.
const MEAN_BOUND: f64 = 0.15;
/// Top-token agreement where the CPU's choice leads its runner-up by more than this.
const CLEAR_MARGIN: f32 = 0.3;

fn log_softmax(row: &[f32]) -> Vec<f64> {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
    row.iter().map(|&v| v as f64 - max - sum.ln()).collect()
}

/// The top token and its lead over the runner-up.
fn top_two(row: &[f32]) -> (usize, f32) {
    let (mut best, mut second) = (0, usize::MAX);
    for i in 1..row.len() {
        if row[i] > row[best] {
            second = best;
            best = i;
        } else if second == usize::MAX || row[i] > row[second] {
            second = i;
        }
    }
    (best, row[best] - row[second])
}

/// The target's step over `ids[..=p]` from position 0, then two draft steps at `p` (token
/// `ids[p + 1]`, the target's row) and `p + 1` (token `ids[p + 2]`, the layer's own row).
fn drafts(b: &mut dyn Backend, ids: &[u32], p: usize, pages: &[u32]) -> [Vec<f32>; 2] {
    b.forward(&[SeqBatch {
        tokens: &ids[..p + 1],
        start_pos: 0,
        block_table: pages,
        window_table: &[],
        state_slot: Some(0),
        state_copy: Default::default(),
        logits: LogitsRequest::None,
    }])
    .unwrap();
    let mut step = |i: usize| {
        let out = b
            .head_draft(&[HeadDraftStep {
                state_slot: 0,
                token: ids[p + 1 + i],
                position: p + i,
                block_table: pages,
                from_target: i == 0,
            }])
            .unwrap();
        out.row(0).to_vec()
    };
    [step(0), step(1)]
}

#[test]
fn the_mtp_layer_on_cuda_matches_the_cpu() {
    let Some(_) = common::gpu("mtp") else {
        return;
    };
    let dir = fixture_path("arch").join("qwen3_5");
    let (config, weights) = load::hf_dir(&dir).unwrap();
    let mut cpu = CpuBackend::new(config.clone(), weights, 2).unwrap();
    let (_, weights) = load::hf_dir(&dir).unwrap();
    let mut cuda = CudaBackend::new(
        config,
        WeightSource::Host(weights),
        test_options(false, true),
    )
    .unwrap();
    let page_size = 4;
    for b in [&mut cpu as &mut dyn Backend, &mut cuda] {
        assert!(b.has_draft_head(), "the fixture has an MTP layer");
        b.enable_draft_head().unwrap();
        b.init_state_slots(1).unwrap();
        b.init_kv_cache(64, page_size).unwrap();
    }
    let text = std::fs::read_to_string(dir.join("mtp_reference.json")).unwrap();
    let reference: serde_json::Value = serde_json::from_str(&text).unwrap();
    let (mut sum, mut rows, mut worst) = (0.0f64, 0usize, 0.0f64);
    let (mut clear, mut agree) = (0, 0);
    for case in reference["cases"].as_array().unwrap() {
        let ids = ids(&case["ids"]);
        let n = ids.len();
        let pages: Vec<u32> = (0..n.div_ceil(page_size) as u32).collect();
        for p in 0..n - 3 {
            let want = drafts(&mut cpu, &ids, p, &pages);
            let got = drafts(&mut cuda, &ids, p, &pages);
            for (w, g) in want.iter().zip(&got) {
                let (lw, lg) = (log_softmax(w), log_softmax(g));
                let mean =
                    lw.iter().zip(&lg).map(|(a, b)| (a - b).abs()).sum::<f64>() / lw.len() as f64;
                sum += mean;
                worst = worst.max(mean);
                rows += 1;
                let ((best_w, margin), (best_g, _)) = (top_two(w), top_two(g));
                if margin > CLEAR_MARGIN {
                    clear += 1;
                    agree += usize::from(best_w == best_g);
                }
            }
        }
    }
    let mean = sum / rows as f64;
    println!(
        "MTP drafts, CUDA against the CPU: mean |Δ logprob| {mean:.3e} (worst row {worst:.3e}) \
         over {rows} rows; top token {agree}/{clear} where the CPU's lead > {CLEAR_MARGIN}"
    );
    assert!(mean <= MEAN_BOUND, "mean |Δ logprob| {mean}");
    assert_eq!(agree, clear, "top tokens differ at clear choices");
    assert!(clear > 0);
}
