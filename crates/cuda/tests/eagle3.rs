//! EAGLE-3 heads on CUDA. Against the CPU backend on the same weights (the llama fixture and
//! its two random heads, one per published layout, scripts/make_eagle3_fixture.py; the CPU's
//! own test holds them against PyTorch): at every position of the reference prompts, the
//! target's step over the prompt so far (whose catch-up writes the head's K/V for the pairs
//! before, from the layer inputs the step captured), a first draft step from the target's
//! rows and a second from the head's own output; both backends' log-probabilities over the
//! draft vocabulary are compared. Through the engine: greedy output with EAGLE-3 drafts is
//! plain greedy output, on the fixture (prefix hits, a second turn) and on the Llama-3.1-8B
//! shape with random weights and a random head (ferrite_model::dummy::dummy_eagle3).

mod common;

use std::sync::Arc;

use common::engine_run::{run_greedy, Outcome};
use common::fixtures::{fixture_path, ids, test_options};
use ferrite_cpu::CpuBackend;
use ferrite_cuda::{CudaBackend, WeightSource};
use ferrite_engine::{
    build_engine_core, Backend, EngineConfig, EngineCore, EngineStats, HeadDraftStep, HeadProposer,
    LogitsRequest, SeqBatch, SpecOptions, StateCacheOptions,
};
use ferrite_model::config::ModelConfig;
use ferrite_model::load::{self, Eagle3Head};
use ferrite_model::mapping::MapPages;

/// Mean |Δ logprob| over the draft vocabulary CUDA (bf16 products, bf16 captured rows) may
/// keep from the CPU (f32) per draft row; the MTP layer on the qwen3_5 fixture: 3.3e-2. A
/// wrong row, position, norm, map or K/V moves log-probabilities by whole units.
const MEAN_BOUND: f64 = 0.15;
/// Top-token agreement where the CPU's choice leads its runner-up by more than this.
const CLEAR_MARGIN: f64 = 0.3;
/// How far a verification's log-probabilities may drift from plain decoding's, and so how
/// close a choice must be to the runner-up for the two runs to part there (a verification's
/// rows run the prefill attention kernel, plain decoding the split-KV decode kernel).
const ROUNDING_DRIFT: f32 = 0.15;

fn head(name: &str, target: &ModelConfig) -> Eagle3Head {
    let dir = fixture_path("eagle3").join(name);
    load::eagle3_dir(&dir, target, MapPages::Plain).unwrap()
}

/// Log-probabilities over the draft vocabulary (the row is -inf elsewhere).
fn draft_logprobs(row: &[f32], draft_to_target: &[u32]) -> Vec<f64> {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
    let lse = max + sum.ln();
    draft_to_target
        .iter()
        .map(|&id| row[id as usize] as f64 - lse)
        .collect()
}

fn best(v: &[f64]) -> usize {
    (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b })
}

/// The target's step over `ids[..=p]`, then a draft step at `p` with `token` from the target's
/// rows: its row.
fn target_then_draft(b: &mut dyn Backend, ids: &[u32], p: usize, pages: &[u32]) -> Vec<f32> {
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
    draft(b, ids[p + 1], p, pages, true)
}

fn draft(b: &mut dyn Backend, token: u32, position: usize, pages: &[u32], first: bool) -> Vec<f32> {
    let out = b
        .head_draft(&[HeadDraftStep {
            state_slot: 0,
            token,
            position,
            block_table: pages,
            from_target: first,
        }])
        .unwrap();
    out.row(0).to_vec()
}

#[test]
fn eagle3_heads_on_cuda_match_the_cpu() {
    let Some(_) = common::gpu("eagle3") else {
        return;
    };
    let dir = fixture_path("arch").join("llama");
    let text = std::fs::read_to_string(fixture_path("eagle3").join("reference.json")).unwrap();
    let reference: serde_json::Value = serde_json::from_str(&text).unwrap();
    let page_size = 4;
    for name in ["llama_eagle", "llama_speculators"] {
        let (config, weights) = load::hf_dir(&dir).unwrap();
        let h = head(name, &config);
        let cpu = CpuBackend::new(config.clone(), weights, 2).unwrap();
        let mut cpu = cpu.with_eagle3(&h).unwrap();
        let (_, weights) = load::hf_dir(&dir).unwrap();
        let options = test_options(false, true);
        let cuda = CudaBackend::new(config, WeightSource::Host(weights), options).unwrap();
        let mut cuda = cuda.with_eagle3(&h).unwrap();
        for b in [&mut cpu as &mut dyn Backend, &mut cuda] {
            assert!(b.has_draft_head());
            b.enable_draft_head().unwrap();
            b.init_state_slots(1).unwrap();
            b.init_kv_cache(64, page_size).unwrap();
        }
        let (mut sum, mut rows, mut worst) = (0.0f64, 0usize, 0.0f64);
        let (mut clear, mut agree) = (0, 0);
        for case in reference["heads"][name]["cases"].as_array().unwrap() {
            let ids = ids(&case["ids"]);
            let n = ids.len();
            let pages: Vec<u32> = (0..n.div_ceil(page_size) as u32).collect();
            for p in 0..n - 2 {
                let want1 = target_then_draft(&mut cpu, &ids, p, &pages);
                let got1 = target_then_draft(&mut cuda, &ids, p, &pages);
                // The second step drafts from the CPU's first choice, on both backends.
                let first = best(&draft_logprobs(&want1, &h.draft_to_target));
                let token = h.draft_to_target[first];
                let want2 = draft(&mut cpu, token, p + 1, &pages, false);
                let got2 = draft(&mut cuda, token, p + 1, &pages, false);
                for (w, g) in [(want1, got1), (want2, got2)] {
                    let lw = draft_logprobs(&w, &h.draft_to_target);
                    let lg = draft_logprobs(&g, &h.draft_to_target);
                    let mean = lw.iter().zip(&lg).map(|(a, b)| (a - b).abs()).sum::<f64>()
                        / lw.len() as f64;
                    sum += mean;
                    worst = worst.max(mean);
                    rows += 1;
                    let top = best(&lw);
                    let runner_up = (0..lw.len())
                        .filter(|&i| i != top)
                        .map(|i| lw[i])
                        .fold(f64::NEG_INFINITY, f64::max);
                    if lw[top] - runner_up > CLEAR_MARGIN {
                        clear += 1;
                        agree += usize::from(best(&lg) == top);
                    }
                    // Outside the draft vocabulary nothing may be scored.
                    let finite = g.iter().filter(|v| v.is_finite()).count();
                    assert!(finite <= h.draft_to_target.len(), "{name}: {finite} scored");
                }
            }
        }
        let mean = sum / rows as f64;
        println!(
            "{name}: EAGLE-3 drafts, CUDA against the CPU: mean |Δ logprob| {mean:.3e} (worst \
             row {worst:.3e}) over {rows} rows; top token {agree}/{clear} where the CPU's lead \
             > {CLEAR_MARGIN}"
        );
        assert!(mean <= MEAN_BOUND, "{name}: mean |Δ logprob| {mean}");
        assert_eq!(agree, clear, "{name}: top tokens differ at clear choices");
        assert!(clear > 0);
    }
}

fn engine(backend: CudaBackend, eagle3: bool, page_size: usize, kv_bytes: usize) -> EngineCore {
    let config = EngineConfig {
        page_size,
        kv_cache_memory_bytes: kv_bytes,
        max_num_batched_tokens: 512,
        max_num_seqs: 4,
        prefill_per_decode: 0,
        scheduling_policy: Default::default(),
        enable_prefix_caching: true,
        window_kv_pool: true,
        state_cache: StateCacheOptions {
            memory_bytes: 0,
            snapshot_interval: 16,
        },
        max_model_len: Some(512),
        eos_token_ids: vec![],
        speculation: SpecOptions {
            num_tokens: 3,
            adaptive: false,
            disable_by_batch_size: None,
        },
    };
    let proposer = eagle3.then(|| Box::new(HeadProposer::eagle3()) as _);
    let stats = Arc::new(EngineStats::default());
    build_engine_core(&config, Box::new(backend), proposer, stats).unwrap()
}

/// Three prompts sharing a prefix, batched; then a second turn: the first extended with its
/// answer (its pages cached), and the second again.
fn conversation(core: &mut EngineCore, vocab: u32, new_tokens: usize) -> Outcome {
    let prompt = |len: u32, salt: u32| -> Vec<u32> {
        let shared = (0..16).map(|i| (i * 53 + 7) % vocab);
        let own = (0..len).map(move |i| (i * 37 + salt * 101 + 3) % vocab);
        shared.chain(own).collect()
    };
    let first = vec![prompt(24, 1), prompt(7, 2), prompt(32, 3)];
    let mut outcomes = run_greedy(core, 0, &first, new_tokens);
    let mut next = first[0].clone();
    next.extend(&outcomes[0].0);
    next.extend(prompt(5, 4));
    outcomes.extend(run_greedy(core, 10, &[next, first[1].clone()], new_tokens));
    outcomes
}

/// Plain and drafted outcomes agree: identical tokens up to where the runs part, which must be
/// a near-tie in both; log-probabilities within `ROUNDING_DRIFT` before it. Returns the tokens
/// compared.
fn same_greedy(what: &str, plain: &Outcome, drafted: &Outcome) -> usize {
    let (mut worst, mut compared) = (0.0f32, 0);
    for (i, (e, g)) in plain.iter().zip(drafted).enumerate() {
        let at = e.0.iter().zip(&g.0).position(|(a, b)| a != b);
        let same = at.unwrap_or(e.0.len().min(g.0.len()));
        compared += same;
        for j in 0..same {
            worst = worst.max((e.1[j] - g.1[j]).abs());
        }
        if let Some(at) = at {
            let margin = e.3[at].min(g.3[at]);
            println!(
                "{what}: request {i} parts at token {at} (margin {margin:.2e}); max |Δ logprob| \
                 before it {worst:.2e}"
            );
            assert!(
                margin <= ROUNDING_DRIFT,
                "{what}: request {i} parts at token {at}, where the choice was clear (margin \
                 {margin:.2e})"
            );
        }
    }
    assert!(
        worst <= ROUNDING_DRIFT,
        "{what}: log-probabilities differ by {worst}"
    );
    compared
}

#[test]
fn greedy_output_with_eagle3_drafts_on_the_device_is_plain_greedy_output() {
    let Some(_) = common::gpu("eagle3 speculation") else {
        return;
    };
    let dir = fixture_path("arch").join("llama");
    for name in ["llama_eagle", "llama_speculators"] {
        let run = |eagle3: bool| {
            let (config, weights) = load::hf_dir(&dir).unwrap();
            let vocab = config.vocab_size as u32;
            let h = head(name, &config);
            let options = test_options(false, true);
            let mut backend =
                CudaBackend::new(config, WeightSource::Host(weights), options).unwrap();
            if eagle3 {
                backend = backend.with_eagle3(&h).unwrap();
            }
            let mut core = engine(backend, eagle3, 4, 16 << 20);
            let out = conversation(&mut core, vocab, 40);
            let counters = core.speculation().map(|s| s.counters.clone());
            (out, counters)
        };
        let (plain, _) = run(false);
        let (drafted, counters) = run(true);
        let compared = same_greedy(name, &plain, &drafted);
        let c = counters.expect("speculation stayed on");
        println!(
            "{name}: {} of {} drafts accepted; {compared} tokens compared; turn 2 from {} \
             cached tokens",
            c.num_accepted_tokens, c.num_draft_tokens, drafted[3].2
        );
        assert!(c.num_draft_tokens > 0);
        assert!(
            drafted[3].2 >= 40,
            "the second turn's prefix came from the cache"
        );
        assert!(compared >= 100, "{name}: {compared} tokens compared");
    }
}

#[test]
fn eagle3_drafts_on_the_8b_shape_keep_greedy_output() {
    let Some(_) = common::gpu("eagle3 on the 8B shape") else {
        return;
    };
    let config = ferrite_model::dummy::preset("llama-3.1-8b").unwrap();
    let h = ferrite_model::dummy::dummy_eagle3(&config, 1).unwrap();
    let vocab = config.vocab_size as u32;
    let run = |eagle3: bool| {
        let options = test_options(false, true);
        let source = WeightSource::Dummy { seed: 0 };
        let mut backend = CudaBackend::new(config.clone(), source, options).unwrap();
        if eagle3 {
            backend = backend.with_eagle3(&h).unwrap();
        }
        let mut core = engine(backend, eagle3, 16, 2 << 30);
        let out = conversation(&mut core, vocab, 24);
        let counters = core.speculation().map(|s| s.counters.clone());
        (out, counters)
    };
    let (plain, _) = run(false);
    let (drafted, counters) = run(true);
    let compared = same_greedy("8B shape", &plain, &drafted);
    let c = counters.expect("speculation stayed on");
    println!(
        "8B shape, random head: {} of {} drafts accepted; {compared} tokens compared",
        c.num_accepted_tokens, c.num_draft_tokens
    );
    assert!(c.num_draft_tokens > 0);
}
