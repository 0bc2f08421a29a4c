//! A linear-attention hybrid on CUDA under memory pressure (issue 37: "including sampling with
//! prefix hits and preemption"): the qwen3_next fixture serves six requests at once, greedy
//! and seeded sampling, whose prompts share prefixes, in a KV pool of a dozen pages, so that
//! sequences are preempted (their recurrent state given up and recomputed) and restart from
//! state snapshots at cached pages. The oracle is the same requests with memory to spare and
//! no prefix cache: every answer identical token for token (batch-invariant kernels, and the
//! device's counter-based sampling draws the same whatever shares a step).

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::fixtures::{fixture_path, test_options};
use ferrite_cuda::{CudaBackend, WeightSource};
use ferrite_engine::{
    build_engine_core, Backend, EngineConfig, EngineStats, GenerationRequest, SamplingParams,
    StateCacheOptions,
};
use ferrite_model::load;

const NEW_TOKENS: usize = 32;
const PAGE: usize = 16;

struct Served {
    answers: Vec<Vec<u32>>,
    cached: Vec<usize>,
    preemptions: u64,
}

/// Serves `prompts` all at once; `tight`: a pool of 12 pages and the prefix cache on, else
/// room for everything and no cache.
fn serve(prompts: &[Vec<u32>], tight: bool) -> Served {
    let dir = fixture_path("arch").join("qwen3_next");
    let (config, weights) = load::hf_dir(&dir).unwrap();
    let backend = CudaBackend::new(
        config,
        WeightSource::Host(weights),
        test_options(false, true),
    )
    .unwrap();
    let seats = 4;
    let state = backend.state_bytes_per_sequence();
    let snapshots = 16 * state;
    let pages = if tight { 12 } else { 256 };
    let engine = EngineConfig {
        page_size: PAGE,
        kv_cache_memory_bytes: seats * state
            + snapshots
            + pages * PAGE * backend.kv_bytes_per_token()
            + 1024,
        max_num_batched_tokens: 64,
        max_num_seqs: seats,
        prefill_per_decode: 0,
        scheduling_policy: Default::default(),
        enable_prefix_caching: tight,
        window_kv_pool: true,
        state_cache: StateCacheOptions {
            memory_bytes: snapshots,
            snapshot_interval: PAGE,
        },
        max_model_len: Some(pages.min(128) * PAGE),
        eos_token_ids: vec![],
        speculation: Default::default(),
    };
    let stats = Arc::new(EngineStats::default());
    let mut core = build_engine_core(&engine, Box::new(backend), None, stats.clone()).unwrap();
    for (id, prompt) in prompts.iter().enumerate() {
        let sampled = id % 2 == 1;
        core.add_request(GenerationRequest {
            id: id as u64,
            prompt: prompt.clone(),
            params: SamplingParams {
                temperature: if sampled { 0.9 } else { 0.0 },
                seed: sampled.then_some(7 + id as u64),
                max_tokens: NEW_TOKENS,
                ignore_eos: true,
                ..SamplingParams::default()
            },
            arrival: std::time::Instant::now(),
        });
    }
    let (mut answers, mut cached) = (vec![Vec::new(); prompts.len()], vec![0; prompts.len()]);
    while core.has_work() {
        for o in core.step() {
            if let Some(p) = &o.prompt {
                cached[o.id as usize] = p.num_cached_tokens;
            }
            answers[o.id as usize].extend(o.tokens);
        }
    }
    let preemptions = stats.num_preemptions_total.load(Ordering::Relaxed);
    Served {
        answers,
        cached,
        preemptions,
    }
}

#[test]
fn preempted_and_cached_hybrid_sequences_answer_as_with_memory_to_spare() {
    let Some(_) = common::gpu("hybrid preemption") else {
        return;
    };
    let shared: Vec<u32> = (0..48u32).map(|i| (i * 37 + 11) % 256).collect();
    let prompts: Vec<Vec<u32>> = (0..6u32)
        .map(|r| {
            let own = (0..20 + 7 * r).map(|i| (i * 13 + 5 * r + 3) % 256);
            // Requests 0, 2, 4 start with the shared prefix; the others are their own.
            let head = if r % 2 == 0 {
                shared.clone()
            } else {
                Vec::new()
            };
            head.into_iter().chain(own).collect()
        })
        .collect();
    let roomy = serve(&prompts, false);
    let tight = serve(&prompts, true);
    println!(
        "hybrid preemption on CUDA: {} preemptions, cached prompt tokens {:?}",
        tight.preemptions, tight.cached
    );
    assert_eq!(roomy.preemptions, 0);
    assert!(tight.preemptions > 0, "nothing was preempted");
    for (i, (a, b)) in roomy.answers.iter().zip(&tight.answers).enumerate() {
        assert_eq!(a.len(), NEW_TOKENS, "request {i}");
        assert_eq!(a, b, "request {i} (sampled: {})", i % 2 == 1);
    }
}
