//! The sliding-window layers' own pool of pages (issue 37), on real architectures through the
//! engine: the random-weight checkpoints of fixtures/arch whose layers slide (gemma3: 5 local
//! layers of window 32 to 1 global; gemma4: window 8 with KV-sharing layers; gpt_oss: banded
//! layers of 8; mistral: every layer windowed, 32), serving prompts several windows long,
//! batched, with a second turn that starts from the prefix cache. The oracle is the same
//! engine with every layer in one pool (`window_kv_pool: false`, the path the transformers
//! parity tests cover): greedy tokens and their log-probabilities must be identical bit for
//! bit (the CPU kernels are batch-invariant, so how sequences share steps does not matter).
//! It also holds the memory promise: the same budget gives the other layers more pages.

mod common;

use common::engine_run::{run_greedy, Outcome};
use std::sync::Arc;

use common::repo_root;
use ferrite_cpu::CpuBackend;
use ferrite_engine::{build_engine_core, Backend, EngineConfig, EngineCore, EngineStats};
use ferrite_model::load;

const NEW_TOKENS: usize = 24;

fn backend(arch: &str) -> CpuBackend {
    let dir = repo_root().join("fixtures/arch").join(arch);
    let (config, weights) = load::hf_dir(&dir).unwrap_or_else(|e| panic!("{arch}: {e}"));
    CpuBackend::new(config, weights, 2).unwrap()
}

fn core(arch: &str, window_kv_pool: bool) -> EngineCore {
    let config = EngineConfig {
        page_size: 4,
        kv_cache_memory_bytes: 4 << 20,
        max_num_batched_tokens: 48,
        max_num_seqs: 4,
        prefill_per_decode: 0,
        scheduling_policy: Default::default(),
        enable_prefix_caching: true,
        window_kv_pool,
        state_cache: Default::default(),
        max_model_len: Some(512),
        eos_token_ids: vec![],
        speculation: Default::default(),
    };
    let stats = Arc::new(EngineStats::default());
    build_engine_core(&config, Box::new(backend(arch)), None, stats).unwrap()
}

fn run(core: &mut EngineCore, first_id: u64, prompts: &[Vec<u32>]) -> Outcome {
    run_greedy(core, first_id, prompts, NEW_TOKENS)
}

/// Prompts several windows long (ids spread over the vocabulary), then a second turn that
/// extends the first prompt with its answer.
fn conversation(core: &mut EngineCore, vocab: u32) -> (Outcome, Outcome) {
    let prompt = |len: u32, salt: u32| -> Vec<u32> {
        (0..len)
            .map(|i| (i * 37 + salt * 101 + 3) % vocab)
            .collect()
    };
    let first = vec![prompt(90, 1), prompt(61, 2), prompt(130, 3)];
    let turn1 = run(core, 0, &first);
    let mut next = first[0].clone();
    next.extend(&turn1[0].0);
    next.extend(prompt(9, 4));
    let turn2 = run(core, 10, &[next, prompt(75, 5)]);
    (turn1, turn2)
}

fn check(arch: &str) {
    let vocab = backend(arch).vocab_size() as u32;
    let mut one_pool = core(arch, false);
    let mut two_pools = core(arch, true);
    assert!(one_pool.scheduler().kv().window_pages().is_none());
    let window = two_pools
        .scheduler()
        .kv()
        .window_pages()
        .map(|w| w.window());
    assert!(window.is_some(), "{arch}: no window pool");
    let (pages_one, pages_two) = (
        one_pool.scheduler().kv().num_pages(),
        two_pools.scheduler().kv().num_pages(),
    );
    assert!(
        pages_two > pages_one,
        "{arch}: {pages_two} pages with a window pool, {pages_one} without"
    );
    let (expected1, expected2) = conversation(&mut one_pool, vocab);
    let (got1, got2) = conversation(&mut two_pools, vocab);
    for (i, (e, g)) in expected1
        .iter()
        .chain(&expected2)
        .zip(got1.iter().chain(&got2))
        .enumerate()
    {
        assert_eq!(e.0, g.0, "{arch}: request {i}'s tokens");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&e.1),
            bits(&g.1),
            "{arch}: request {i}'s log-probabilities"
        );
    }
    // The second turn starts from the cache in both: the window pool kept what it reads.
    assert!(
        got2[0].2 >= 90,
        "{arch}: {} cached tokens in turn 2",
        got2[0].2
    );
    assert_eq!(got2[0].2, expected2[0].2, "{arch}: cached tokens differ");
    println!(
        "{arch}: window {window:?}, {pages_one} -> {pages_two} pages, turn 2 cached {}",
        got2[0].2
    );
}

#[test]
fn gemma3_local_layers_in_their_own_pool_change_nothing() {
    check("gemma3");
}

#[test]
fn gemma4_with_kv_sharing_layers_in_their_own_pool_changes_nothing() {
    check("gemma4");
}

#[test]
fn gpt_oss_banded_layers_in_their_own_pool_change_nothing() {
    check("gpt_oss");
}

#[test]
fn mistral_every_layer_windowed_changes_nothing() {
    check("mistral");
}
