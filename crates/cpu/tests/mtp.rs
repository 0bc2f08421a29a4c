//! Qwen3.5's multi-token-prediction layer on the CPU, on the qwen3_5 fixture with a random MTP
//! layer (scripts/make_mtp_fixture.py): the layer's log-probabilities at every position of a
//! prompt, each from the target's hidden state there (the backend's catch-up after the
//! target's step writes the layer's K/V for the positions before), against transformers'
//! float32 Qwen3.5 modules on the same weights (fixtures/arch/qwen3_5/mtp_reference.json); and
//! through the engine, greedy output with MTP drafts is plain greedy output.

mod common;

use std::sync::Arc;

use common::{log_softmax_at, repo_root};
use ferrite_cpu::CpuBackend;
use ferrite_engine::{
    build_engine_core, Backend, EngineConfig, EngineStats, GenerationRequest, HeadDraftStep,
    HeadProposer, LogitsRequest, SamplingParams, SeqBatch, SpecOptions, StateCacheOptions,
};
use ferrite_model::load;

fn backend() -> CpuBackend {
    let dir = repo_root().join("fixtures/arch/qwen3_5");
    let (config, weights) = load::hf_dir(&dir).unwrap();
    CpuBackend::new(config, weights, 2).unwrap()
}

fn reference() -> serde_json::Value {
    let path = repo_root().join("fixtures/arch/qwen3_5/mtp_reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn the_mtp_layer_matches_transformers() {
    let mut b = backend();
    assert!(b.has_draft_head(), "the fixture has an MTP layer");
    b.enable_draft_head().unwrap();
    b.init_state_slots(1).unwrap();
    let page_size = 4;
    b.init_kv_cache(64, page_size).unwrap();
    let (mut deltas, mut argmax_same, mut rows) = (Vec::new(), 0, 0);
    for case in reference()["cases"].as_array().unwrap() {
        let ids = common::ids(&case["ids"]);
        let n = ids.len();
        let pages: Vec<u32> = (0..n.div_ceil(page_size) as u32).collect();
        let want = case["mtp_logprobs"].as_array().unwrap();
        let want_argmax = case["mtp_argmax"].as_array().unwrap();
        for p in 0..n - 2 {
            // The target's step over tokens 0 ..= p: the catch-up writes the MTP's K/V for
            // the pairs at positions before p and keeps the hidden state at p.
            b.forward(&[SeqBatch {
                tokens: &ids[..p + 1],
                start_pos: 0,
                block_table: &pages,
                window_table: &[],
                state_slot: Some(0),
                state_copy: Default::default(),
                logits: LogitsRequest::None,
            }])
            .unwrap();
            let out = b
                .head_draft(&[HeadDraftStep {
                    state_slot: 0,
                    token: ids[p + 1],
                    position: p,
                    block_table: &pages,
                    from_target: true,
                }])
                .unwrap();
            let got = log_softmax_at(out.row(0), ids[p + 2]);
            deltas.push((got - want[p].as_f64().unwrap()).abs());
            let best = common::argmax(out.row(0));
            argmax_same += usize::from(best as u64 == want_argmax[p].as_u64().unwrap());
            rows += 1;
        }
    }
    let mean = deltas.iter().sum::<f64>() / deltas.len() as f64;
    let max = deltas.iter().cloned().fold(0.0, f64::max);
    println!(
        "MTP log-probabilities: mean |Δ| {mean:.2e}, max {max:.2e}; argmax {argmax_same}/{rows}"
    );
    assert!(mean <= 1e-4 && max <= 1e-3, "mean {mean}, max {max}");
    assert_eq!(argmax_same, rows);
}

#[test]
fn greedy_output_with_mtp_drafts_is_plain_greedy_output() {
    let run = |mtp: bool| {
        let config = EngineConfig {
            page_size: 4,
            kv_cache_memory_bytes: 24 << 20,
            max_num_batched_tokens: 64,
            max_num_seqs: 4,
            prefill_per_decode: 0,
            scheduling_policy: Default::default(),
            enable_prefix_caching: true,
            window_kv_pool: true,
            state_cache: StateCacheOptions {
                memory_bytes: 8 << 20,
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
        let proposer = mtp.then(|| Box::new(HeadProposer::mtp()) as _);
        let stats = Arc::new(EngineStats::default());
        let mut core = build_engine_core(&config, Box::new(backend()), proposer, stats).unwrap();
        let prompts: Vec<Vec<u32>> = (0..3u32)
            .map(|s| {
                (0..20 + 7 * s)
                    .map(|i| (i * 37 + s * 101 + 3) % 512)
                    .collect()
            })
            .collect();
        for (i, prompt) in prompts.iter().enumerate() {
            core.add_request(GenerationRequest {
                id: i as u64,
                prompt: prompt.clone(),
                params: SamplingParams {
                    temperature: 0.0,
                    max_tokens: 30,
                    ignore_eos: true,
                    logprobs: Some(0),
                    ..SamplingParams::default()
                },
                arrival: std::time::Instant::now(),
            });
        }
        let mut out = vec![(Vec::new(), Vec::new()); prompts.len()];
        while core.has_work() {
            for o in core.step() {
                out[o.id as usize].0.extend(o.tokens);
                out[o.id as usize]
                    .1
                    .extend(o.logprobs.iter().map(|l| l.logprob.to_bits()));
            }
        }
        let counters = core.speculation().map(|s| s.counters.clone());
        (out, counters)
    };
    let (plain, _) = run(false);
    let (drafted, counters) = run(true);
    assert_eq!(plain, drafted);
    let c = counters.expect("speculation stayed on");
    println!(
        "MTP drafts on random weights: {} of {} accepted",
        c.num_accepted_tokens, c.num_draft_tokens
    );
    assert!(c.num_draft_tokens > 0);
}
