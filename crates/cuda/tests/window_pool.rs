//! The sliding-window layers' own pool of pages on CUDA (issue 37), through the engine: the
//! random-weight checkpoints of fixtures/arch whose layers slide (gemma3: window 32 on 5 of 6
//! layers; gpt_oss: banded layers of 8; mistral: every layer windowed, 32), prompts several
//! windows long, batched, decoded through the captured graphs, with a second turn from the
//! prefix cache. The oracle is the same engine with every layer in the one pool: greedy
//! tokens and log-probabilities identical bit for bit (batch-invariant kernels, and the
//! scheduler makes the same steps either way). The windowed layers then write and read
//! through the window tables (`StepInputs`' window slots and page lists), and pages behind
//! the window are the zeroed null page: a mistake there changes the answers.

mod common;

use common::engine_run::{run_greedy, Outcome};
use std::sync::Arc;

use common::fixtures::{fixture_path, test_options};
use ferrite_cuda::{CudaBackend, WeightSource};
use ferrite_engine::{build_engine_core, EngineConfig, EngineCore, EngineStats};
use ferrite_model::load;

const NEW_TOKENS: usize = 24;

fn core(arch: &str, window_kv_pool: bool) -> (EngineCore, u32) {
    let dir = fixture_path("arch").join(arch);
    let (config, weights) = load::hf_dir(&dir).unwrap();
    let vocab = config.vocab_size as u32;
    let options = test_options(false, true);
    let backend = CudaBackend::new(config, WeightSource::Host(weights), options).unwrap();
    let engine = EngineConfig {
        page_size: 16,
        kv_cache_memory_bytes: 64 << 20,
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
    let core = build_engine_core(&engine, Box::new(backend), None, stats).unwrap();
    (core, vocab)
}

fn run(core: &mut EngineCore, first_id: u64, prompts: &[Vec<u32>]) -> Outcome {
    run_greedy(core, first_id, prompts, NEW_TOKENS)
}

fn conversation(core: &mut EngineCore, vocab: u32) -> Outcome {
    let prompt = |len: u32, salt: u32| -> Vec<u32> {
        (0..len)
            .map(|i| (i * 37 + salt * 101 + 3) % vocab)
            .collect()
    };
    let first = vec![prompt(90, 1), prompt(61, 2), prompt(130, 3)];
    let mut all = run(core, 0, &first);
    let mut next = first[0].clone();
    next.extend(&all[0].0);
    next.extend(prompt(9, 4));
    all.extend(run(core, 10, &[next, prompt(75, 5)]));
    all
}

fn check(arch: &str) {
    let (mut one_pool, vocab) = core(arch, false);
    let expected = conversation(&mut one_pool, vocab);
    drop(one_pool);
    let (mut two_pools, _) = core(arch, true);
    let kv = two_pools.scheduler().kv();
    let window = kv.window_pages().map(|w| (w.window(), w.num_pages()));
    assert!(window.is_some(), "{arch}: no window pool");
    let got = conversation(&mut two_pools, vocab);
    for (i, (e, g)) in expected.iter().zip(&got).enumerate() {
        assert_eq!(e.0, g.0, "{arch}: request {i}'s tokens");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&e.1),
            bits(&g.1),
            "{arch}: request {i}'s log-probabilities"
        );
        assert_eq!(e.2, g.2, "{arch}: request {i}'s cached tokens");
    }
    assert!(got[3].2 >= 90, "{arch}: turn 2 cached only {}", got[3].2);
    println!("{arch}: window pool {window:?}, turn 2 cached {}", got[3].2);
}

#[test]
fn sliding_layers_in_their_own_pool_answer_the_same() {
    let Some(_) = common::gpu("window pool") else {
        return;
    };
    for arch in ["gemma3", "gpt_oss", "mistral"] {
        check(arch);
    }
}
