//! Speculative decoding on the linear-attention hybrids (qwen3_5, qwen3_5_moe, qwen3_next: the
//! random-weight checkpoints of fixtures/arch) through the engine: a rejected draft must be
//! taken back out of every linear layer's recurrent state, so the next step continues from
//! the state of the tokens kept. The oracle is the same engine without speculation (the path
//! the transformers parity tests cover): greedy tokens and their log-probabilities identical
//! bit for bit, over batched prompts and a second turn that restores a state snapshot from
//! the prefix cache; and drafts are both accepted and rejected, so rewinds really run.

mod common;

use common::engine_run::{run_greedy, Outcome};
use std::sync::Arc;

use common::repo_root;
use ferrite_cpu::CpuBackend;
use ferrite_engine::{
    build_engine_core, Backend, EngineConfig, EngineCore, EngineStats, Proposer, SpecOptions,
    StateCacheOptions, SuffixProposer,
};
use ferrite_model::load;

const NEW_TOKENS: usize = 40;

fn backend(arch: &str) -> CpuBackend {
    let dir = repo_root().join("fixtures/arch").join(arch);
    let (config, weights) = load::hf_dir(&dir).unwrap_or_else(|e| panic!("{arch}: {e}"));
    CpuBackend::new(config, weights, 2).unwrap()
}

fn core(arch: &str, proposer: Option<Box<dyn Proposer>>) -> EngineCore {
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
            num_tokens: 4,
            adaptive: false,
            disable_by_batch_size: None,
        },
    };
    let stats = Arc::new(EngineStats::default());
    build_engine_core(&config, Box::new(backend(arch)), proposer, stats).unwrap()
}

fn run(core: &mut EngineCore, first_id: u64, prompts: &[Vec<u32>]) -> Outcome {
    run_greedy(core, first_id, prompts, NEW_TOKENS)
}

/// Batched prompts, then a second turn: the first prompt extended with
/// its answer, and the second prompt again (whose answer suffix decoding knows by then, so
/// its drafts are kept up to the end).
fn conversation(core: &mut EngineCore, vocab: u32) -> Vec<(Vec<u32>, Vec<f32>, usize)> {
    let prompt = |len: u32, salt: u32| -> Vec<u32> {
        (0..len)
            .map(|i| (i * 37 + salt * 101 + 3) % vocab)
            .collect()
    };
    let first = vec![prompt(40, 1), prompt(23, 2), prompt(48, 3)];
    let mut outcomes = run(core, 0, &first);
    let mut next = first[0].clone();
    next.extend(&outcomes[0].0);
    next.extend(prompt(5, 4));
    outcomes.extend(run(core, 10, &[next, first[1].clone()]));
    outcomes
}

fn check(arch: &str, proposer: fn() -> Box<dyn Proposer>) {
    let vocab = backend(arch).vocab_size() as u32;
    let expected = conversation(&mut core(arch, None), vocab);
    let mut speculating = core(arch, Some(proposer()));
    let got = conversation(&mut speculating, vocab);
    let name = speculating.speculation().map(|s| s.method());
    for (i, (e, g)) in expected.iter().zip(&got).enumerate() {
        assert_eq!(e.0, g.0, "{arch} {name:?}: request {i}'s tokens");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&e.1),
            bits(&g.1),
            "{arch} {name:?}: request {i}'s log-probabilities"
        );
        assert_eq!(e.2, g.2, "{arch} {name:?}: request {i}'s cached tokens");
    }
    assert!(
        got[3].2 >= 40,
        "{arch}: {} cached tokens in turn 2",
        got[3].2
    );
    let counters = &speculating
        .speculation()
        .expect("speculation stayed on")
        .counters;
    println!(
        "{arch} {name:?}: {} of {} drafts accepted; turn 2 started from {} cached tokens",
        counters.num_accepted_tokens, counters.num_draft_tokens, got[3].2
    );
    assert!(
        counters.num_accepted_tokens > 0
            && counters.num_accepted_tokens < counters.num_draft_tokens,
        "{arch}: drafts must be both kept and rejected"
    );
}

fn suffix() -> Box<dyn Proposer> {
    Box::new(SuffixProposer::new(Default::default()))
}

#[test]
fn qwen3_5_takes_rejected_drafts_out_of_its_state() {
    check("qwen3_5", suffix);
}

#[test]
fn qwen3_5_moe_takes_rejected_drafts_out_of_its_state() {
    check("qwen3_5_moe", suffix);
}

#[test]
fn qwen3_next_takes_rejected_drafts_out_of_its_state() {
    check("qwen3_next", suffix);
}
