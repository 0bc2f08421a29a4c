use std::collections::HashMap;
use std::sync::mpsc;
use std::time::Duration;

use super::*;
use crate::request::{FinishReason, SamplingParams};
use crate::setup::{build_engine_core, size_kv_pool};
use crate::testing::fake_backend::{expected_greedy, FakeBackend};
use crate::testing::harness::{greedy, request};
use std::sync::atomic::Ordering;

fn config(kv_bytes: usize) -> EngineConfig {
    EngineConfig {
        page_size: 16,
        kv_cache_memory_bytes: kv_bytes,
        max_num_batched_tokens: 64,
        max_num_seqs: 8,
        prefill_per_decode: 0,
        scheduling_policy: Default::default(),
        enable_prefix_caching: true,
        window_kv_pool: true,
        state_cache: Default::default(),
        max_model_len: None,
        eos_token_ids: vec![],
        speculation: crate::SpecOptions::default(),
    }
}

#[test]
fn a_draft_models_cache_shares_the_memory() {
    // 64 bytes per token for the target and 64 for the draft: half the pages.
    let backend = FakeBackend::new(1 << 20);
    let alone = size_kv_pool(&config(1 << 20), &backend, None)
        .unwrap()
        .num_pages;
    let shared = size_kv_pool(&config(1 << 20), &backend, Some(64))
        .unwrap()
        .num_pages;
    assert_eq!((alone, shared), (1024, 512));
    let draft = crate::speculative::DraftModel::new(Box::new(FakeBackend::new(4096))).unwrap();
    let stats = Arc::new(EngineStats::default());
    let backend = Box::new(FakeBackend::new(4096));
    let core = build_engine_core(&config(1 << 20), backend, Some(Box::new(draft)), stats).unwrap();
    assert_eq!(core.scheduler().kv().num_pages(), 512);
    assert!(core.speculation().is_some());
}

#[test]
fn speculating_on_recurrent_state_takes_a_rewind_copy_per_seat() {
    // 256 bytes of state a sequence, 4 seats, no snapshots: 1 KiB of state, and 1 KiB more
    // when each seat keeps what rewinding a step takes.
    let mut backend = FakeBackend::new(4096);
    backend.recurrent = true;
    let c = EngineConfig {
        max_num_seqs: 4,
        enable_prefix_caching: false,
        ..config(8 * 1024)
    };
    let pages = |speculation| size_kv_pool(&c, &backend, speculation).unwrap().num_pages;
    assert_eq!((pages(None), pages(Some(0))), (7, 6));
    let stats = Arc::new(EngineStats::default());
    let proposer = Box::new(crate::speculative::NgramProposer::default());
    let core = build_engine_core(&c, Box::new(backend), Some(proposer), stats).unwrap();
    assert!(core.speculation().is_some());
    assert_eq!(core.scheduler().kv().num_pages(), 6);
}

#[test]
fn pool_size_follows_memory_and_caps_the_context() {
    // The fake backend takes 64 bytes per token: a 16-token page is 1 KiB.
    let backend = FakeBackend::new(4096);
    let sizes = |c: &EngineConfig| {
        let s = size_kv_pool(c, &backend, None).unwrap();
        (s.num_pages, s.max_model_len)
    };
    assert_eq!(sizes(&config(10 * 1024 + 5)), (10, 160));
    assert_eq!(sizes(&config(1 << 20)), (1024, 4096));
    let explicit = EngineConfig {
        max_model_len: Some(100),
        ..config(1 << 20)
    };
    assert_eq!(sizes(&explicit), (1024, 100));
    for bad in [
        config(1000),
        EngineConfig {
            max_model_len: Some(161),
            ..config(10 * 1024)
        },
        EngineConfig {
            page_size: 0,
            ..config(1 << 20)
        },
        EngineConfig {
            max_num_seqs: 0,
            ..config(1 << 20)
        },
    ] {
        assert!(matches!(
            size_kv_pool(&bad, &backend, None),
            Err(EngineError::Config(_))
        ));
    }
}

#[test]
fn the_scheduler_thread_serves_requests_and_aborts() {
    let (tx, rx) = mpsc::channel();
    let mut backend = FakeBackend::new(4096);
    // Slow enough that the abort lands long before the endless request reaches the context limit.
    backend.delay = Some(Duration::from_millis(1));
    let engine = spawn_engine(config(1 << 20), Box::new(backend), None, tx).unwrap();
    assert_eq!(
        (
            engine.num_pages(),
            engine.page_size(),
            engine.max_model_len()
        ),
        (1024, 16, 4096)
    );
    let prompts: Vec<Vec<u32>> = (0..4u32)
        .map(|i| (0..30).map(|t| (t * 3 + i) % 32).collect())
        .collect();
    for (id, prompt) in prompts.iter().enumerate() {
        engine
            .add_request(request(id as u64, prompt.clone(), greedy(20)))
            .unwrap();
    }
    let endless = SamplingParams {
        ignore_eos: true,
        ..greedy(1_000_000)
    };
    engine
        .add_request(request(9, prompts[0].clone(), endless))
        .unwrap();

    let mut tokens: HashMap<u64, Vec<u32>> = HashMap::new();
    let mut finishes = HashMap::new();
    let mut aborted = false;
    while finishes.len() < 5 {
        let step = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("engine output");
        for output in step.outputs {
            tokens.entry(output.id).or_default().extend(&output.tokens);
            if let Some(finish) = output.finish {
                assert!(finishes.insert(output.id, finish).is_none());
            }
        }
        if !aborted && tokens.get(&9).is_some_and(|t| t.len() >= 5) {
            engine.abort(9);
            aborted = true;
        }
    }
    assert_eq!(finishes[&9], FinishReason::Abort);
    for (id, prompt) in prompts.iter().enumerate() {
        assert_eq!(tokens[&(id as u64)], expected_greedy(prompt, 20, &[]));
        assert_eq!(finishes[&(id as u64)], FinishReason::Length);
    }
    // Stats are published after the step that ended the last request.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while engine.stats().num_running.load(Ordering::Relaxed) > 0
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(engine.stats().num_running.load(Ordering::Relaxed), 0);
    assert_eq!(engine.stats().kv_pages_used.load(Ordering::Relaxed), 0);
    assert_eq!(engine.stats().kv_cache_usage(), 0.0);
    assert!(
        engine
            .stats()
            .generation_tokens_total
            .load(Ordering::Relaxed)
            >= 85
    );
    assert_eq!(
        engine.stats().prompt_tokens_total.load(Ordering::Relaxed),
        150
    );
}

#[test]
fn a_stopped_engine_refuses_requests() {
    let (tx, rx) = mpsc::channel();
    let engine = spawn_engine(config(1 << 20), Box::new(FakeBackend::new(4096)), None, tx).unwrap();
    drop(rx);
    engine
        .add_request(request(1, vec![1, 2], greedy(3)))
        .unwrap();
    // The thread ends once it finds nobody listening; then the channel is closed.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while engine.add_request(request(2, vec![1], greedy(1))).is_ok() {
        assert!(std::time::Instant::now() < deadline, "engine never stopped");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_thread_free_core_steps_like_the_thread() {
    let stats = Arc::new(EngineStats::default());
    let backend = Box::new(FakeBackend::new(4096));
    let mut core =
        build_engine_core(&config(64 * 1024), backend, None, Arc::clone(&stats)).unwrap();
    assert_eq!(core.max_model_len(), 1024);
    let prompt: Vec<u32> = (0..50).map(|t| t % 32).collect();
    core.add_request(request(1, prompt.clone(), greedy(6)));
    let mut tokens = Vec::new();
    while core.has_work() {
        tokens.extend(core.step().into_iter().flat_map(|o| o.tokens));
    }
    assert_eq!(tokens, expected_greedy(&prompt, 6, &[]));
    assert_eq!(stats.generation_tokens_total.load(Ordering::Relaxed), 6);
}

#[test]
fn the_handle_can_be_shared_across_threads() {
    fn shared<T: Send + Sync + Clone + 'static>() {}
    shared::<EngineHandle>();
}
