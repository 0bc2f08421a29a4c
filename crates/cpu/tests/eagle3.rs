//! EAGLE-3 heads on the CPU, on the llama fixture with two random heads, one per published
//! layout (scripts/make_eagle3_fixture.py): each head's draft log-probabilities over its
//! vocabulary at every position of a prompt, for the first draft step (from the target's
//! captured hidden states) and the second (from the head's own output), against a float32
//! PyTorch implementation of the architecture on the same weights
//! (fixtures/eagle3/reference.json); and through the engine, greedy output with EAGLE-3 drafts
//! is plain greedy output, with prefix caching on.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::repo_root;
use ferrite_cpu::CpuBackend;
use ferrite_engine::{
    build_engine_core, Backend, EngineConfig, EngineStats, GenerationRequest, HeadDraftStep,
    HeadProposer, LogitsRequest, SamplingParams, SeqBatch, SpecOptions, StateCacheOptions,
};
use ferrite_model::load::{self, Eagle3Head};
use ferrite_model::mapping::MapPages;

fn backend(head: &str) -> (CpuBackend, Eagle3Head) {
    let (config, weights) = load::hf_dir(&repo_root().join("fixtures/arch/llama")).unwrap();
    let dir = repo_root().join("fixtures/eagle3").join(head);
    let head = load::eagle3_dir(&dir, &config, MapPages::Plain).unwrap();
    let backend = CpuBackend::new(config, weights, 2).unwrap();
    (backend.with_eagle3(&head).unwrap(), head)
}

fn reference() -> serde_json::Value {
    let path = repo_root().join("fixtures/eagle3/reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The row's log-probabilities at the draft vocabulary's target ids (the row is -inf
/// elsewhere, so these are the log-softmax over the draft vocabulary).
fn draft_logprobs(row: &[f32], draft_to_target: &[u32]) -> Vec<f64> {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
    let lse = max + sum.ln();
    draft_to_target
        .iter()
        .map(|&id| row[id as usize] as f64 - lse)
        .collect()
}

#[test]
fn both_layouts_load_with_their_options() {
    let (_, eagle) = backend("llama_eagle");
    // eagle_config names layer outputs [0, 2, 3]: the inputs of layers 1, 3, 4.
    assert_eq!(eagle.spec.options.aux_layers, [1, 3, 4]);
    assert!(eagle.own_head && !eagle.own_embedding);
    assert!(!eagle.spec.options.residual_normed && !eagle.spec.options.feed_normed);
    let (_, speculators) = backend("llama_speculators");
    assert_eq!(speculators.spec.options.aux_layers, [1, 3, 4]);
    assert!(speculators.own_head && speculators.own_embedding);
    assert!(speculators.spec.options.residual_normed && speculators.spec.options.feed_normed);
    assert_eq!(speculators.spec.options.draft_vocab, 256);
}

#[test]
fn eagle3_heads_match_the_pytorch_reference() {
    let reference = reference();
    for name in ["llama_eagle", "llama_speculators"] {
        let (mut b, head) = backend(name);
        let want_ids: Vec<u32> = common::ids(&reference["heads"][name]["draft_to_target"]);
        assert_eq!(
            head.draft_to_target, want_ids,
            "{name}: d2t read as in PyTorch"
        );
        assert!(b.has_draft_head());
        b.enable_draft_head().unwrap();
        b.init_state_slots(1).unwrap();
        let page_size = 4;
        b.init_kv_cache(64, page_size).unwrap();
        let (mut deltas, mut argmax_same, mut rows) = (Vec::new(), 0, 0);
        for case in reference["heads"][name]["cases"].as_array().unwrap() {
            let ids = common::ids(&case["ids"]);
            let n = ids.len();
            let pages: Vec<u32> = (0..n.div_ceil(page_size) as u32).collect();
            for p in 0..n - 2 {
                // The target's step over tokens 0 ..= p: the catch-up writes the head's K/V
                // for the pairs at positions before p and keeps the target row at p.
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
                let mut token = ids[p + 1];
                for (step, key) in ["first", "second"].into_iter().enumerate() {
                    let out = b
                        .head_draft(&[HeadDraftStep {
                            state_slot: 0,
                            token,
                            position: p + step,
                            block_table: &pages,
                            from_target: step == 0,
                        }])
                        .unwrap();
                    let got = draft_logprobs(out.row(0), &head.draft_to_target);
                    let want: Vec<f64> = case[key][p]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_f64().unwrap())
                        .collect();
                    deltas.extend(got.iter().zip(&want).map(|(g, w)| (g - w).abs()));
                    let best =
                        |v: &[f64]| (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b });
                    argmax_same += usize::from(best(&got) == best(&want));
                    rows += 1;
                    // The next step drafts from this one's choice, as the reference did.
                    token = head.draft_to_target[best(&want)];
                }
            }
        }
        let mean = deltas.iter().sum::<f64>() / deltas.len() as f64;
        let max = deltas.iter().cloned().fold(0.0, f64::max);
        println!(
            "{name}: draft log-probabilities mean |Δ| {mean:.2e}, max {max:.2e}; argmax \
             {argmax_same}/{rows}"
        );
        assert!(
            mean <= 1e-4 && max <= 2e-3,
            "{name}: mean {mean}, max {max}"
        );
        assert_eq!(argmax_same, rows, "{name}");
    }
}

#[test]
fn greedy_output_with_eagle3_drafts_is_plain_greedy_output() {
    let run = |eagle3: bool| {
        let config = EngineConfig {
            page_size: 4,
            kv_cache_memory_bytes: 8 << 20,
            max_num_batched_tokens: 64,
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
        let backend = Box::new(backend("llama_eagle").0);
        let mut core = build_engine_core(&config, backend, proposer, stats.clone()).unwrap();
        // Two prompts share their first 24 tokens: the later ones start from cached pages
        // (and their heads' K/V there), in slots other sequences held.
        let prompts: Vec<Vec<u32>> = (0..5u32)
            .map(|s| {
                let shared = (0..24).map(|i| (i * 53 + 7) % 1000 + 8);
                let own = (0..9 + 5 * s).map(move |i| (i * 37 + s * 101 + 3) % 1000 + 8);
                shared.chain(own).collect()
            })
            .collect();
        let mut out = vec![(Vec::new(), Vec::new()); prompts.len()];
        for (i, prompt) in prompts.iter().enumerate() {
            core.add_request(GenerationRequest {
                id: i as u64,
                prompt: prompt.clone(),
                params: SamplingParams {
                    temperature: 0.0,
                    max_tokens: 24,
                    ignore_eos: true,
                    logprobs: Some(0),
                    ..SamplingParams::default()
                },
                arrival: std::time::Instant::now(),
            });
            // The first request runs alone for a while: the next ones find its pages cached.
            if i == 0 {
                for _ in 0..6 {
                    for o in core.step() {
                        out[o.id as usize].0.extend(o.tokens);
                        let bits = o.logprobs.iter().map(|l| l.logprob.to_bits());
                        out[o.id as usize].1.extend(bits);
                    }
                }
            }
        }
        while core.has_work() {
            for o in core.step() {
                out[o.id as usize].0.extend(o.tokens);
                let bits = o.logprobs.iter().map(|l| l.logprob.to_bits());
                out[o.id as usize].1.extend(bits);
            }
        }
        let counters = core.speculation().map(|s| s.counters.clone());
        let hits = stats.prefix_cache_hits_total.load(Ordering::Relaxed);
        (out, counters, hits)
    };
    let (plain, _, _) = run(false);
    let (drafted, counters, hits) = run(true);
    assert_eq!(plain, drafted);
    let c = counters.expect("speculation stayed on");
    println!(
        "EAGLE-3 drafts on random weights: {} of {} accepted; {hits} prefix-hit tokens",
        c.num_accepted_tokens, c.num_draft_tokens
    );
    assert!(c.num_draft_tokens > 0);
    assert!(hits > 0, "the shared prefix was served from the cache");
}
