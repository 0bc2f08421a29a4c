//! A linear-attention hybrid served by the engine on CUDA (the qwen3_next fixture's weights):
//! a second turn that extends the first turn's prompt and answer restarts from a state
//! snapshot at a cached page (the restore and the saves run on the device,
//! `CudaBackend::copy_states`) and answers what a server without prefix caching answers.
//! Batch-invariant kernels, so that a prompt run whole or from a snapshot gives the same bits.

mod common;

use std::sync::Arc;

use common::fixtures::{fixture_path, test_options};
use ferrite_cuda::{CudaBackend, WeightSource};
use ferrite_engine::{
    build_engine_core, EngineConfig, EngineStats, GenerationRequest, SamplingParams, SpecOptions,
    StateCacheOptions,
};
use ferrite_model::load;

const NEW_TOKENS: usize = 24;

/// (cached prompt tokens, greedy answer) of each request, run one after the other.
fn serve(turns: &[Vec<u32>], caching: bool, kv_bytes: usize) -> Vec<(usize, Vec<u32>)> {
    let dir = fixture_path("arch").join("qwen3_next");
    let (config, weights) = load::hf_dir(&dir).unwrap();
    let backend = CudaBackend::new(
        config,
        WeightSource::Host(weights),
        test_options(false, true),
    )
    .unwrap();
    let engine = EngineConfig {
        page_size: 16,
        kv_cache_memory_bytes: kv_bytes,
        max_num_batched_tokens: 64,
        max_num_seqs: 4,
        prefill_per_decode: 0,
        scheduling_policy: Default::default(),
        enable_prefix_caching: caching,
        window_kv_pool: true,
        state_cache: StateCacheOptions {
            memory_bytes: kv_bytes / 4,
            snapshot_interval: 16,
        },
        max_model_len: Some(512),
        eos_token_ids: vec![],
        speculation: SpecOptions::default(),
    };
    let stats = Arc::new(EngineStats::default());
    let mut core = build_engine_core(&engine, Box::new(backend), None, stats).unwrap();
    let mut out = Vec::new();
    for (id, prompt) in turns.iter().enumerate() {
        core.add_request(GenerationRequest {
            id: id as u64,
            prompt: prompt.clone(),
            params: SamplingParams {
                temperature: 0.0,
                max_tokens: NEW_TOKENS,
                ignore_eos: true,
                ..SamplingParams::default()
            },
            arrival: std::time::Instant::now(),
        });
        let (mut cached, mut tokens) = (0, Vec::new());
        while core.has_work() {
            for o in core.step() {
                if let Some(p) = &o.prompt {
                    cached = p.num_cached_tokens;
                }
                tokens.extend(o.tokens);
            }
        }
        out.push((cached, tokens));
    }
    out
}

#[test]
fn a_second_turn_restarts_from_a_snapshot_and_answers_the_same() {
    let Some(_) = common::gpu("hybrid engine") else {
        return;
    };
    let first: Vec<u32> = (0..70u32).map(|i| (i * 37 + 11) % 256).collect();
    let plain_first = serve(std::slice::from_ref(&first), false, 64 << 20);
    let mut second = first.clone();
    second.extend(&plain_first[0].1);
    second.extend((0..20u32).map(|i| (i * 13 + 5) % 256));
    let turns = vec![first, second];
    let plain = serve(&turns, false, 64 << 20);
    let cached = serve(&turns, true, 64 << 20);
    println!(
        "hybrid on CUDA: second turn cached {} of {} prompt tokens",
        cached[1].0,
        turns[1].len()
    );
    assert_eq!(plain[1].0, 0);
    // 70 + 24 tokens of the first turn: snapshots every 16, the last at 80.
    assert!(cached[1].0 >= 80, "cached {}", cached[1].0);
    assert_eq!(cached[0].1, plain[0].1, "first turn");
    assert_eq!(cached[1].1, plain[1].1, "second turn from the snapshot");
}
