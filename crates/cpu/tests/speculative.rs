//! Speculative decoding on real models through the engine: greedy output with n-gram or
//! draft-model speculation is token for token the output of plain greedy decoding, batched
//! and alone. That holds only because the kernels are batch-invariant (a verification chunk
//! gives each position the logits a one-token decode step would), which this checks on the
//! real weights rather than the fake model of the engine's own tests.

mod common;

use std::sync::Arc;

use common::{model_path, repo_root};
use ferrite_cpu::CpuBackend;
use ferrite_engine::{
    build_engine_core, EngineConfig, EngineStats, GenerationRequest, SamplingParams, SpecOptions,
};
use ferrite_engine::{DraftModel, NgramProposer, Proposer, SuffixProposer};
use ferrite_model::gguf::GgufFile;

const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
const QWEN: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
const NEW_TOKENS: usize = 40;

fn backend(file: &str) -> CpuBackend {
    let gguf = GgufFile::open(&model_path(file)).unwrap();
    CpuBackend::new(gguf.config().unwrap(), gguf.weights(), 2).unwrap()
}

fn prompts(fixture: &str) -> Vec<Vec<u32>> {
    let path = repo_root().join("fixtures/reference").join(fixture);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["generate"]
        .as_array()
        .unwrap()
        .iter()
        .take(6)
        .map(|case| {
            case["prompt_ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect()
        })
        .collect()
}

/// Greedy outputs of `prompts`, all submitted at once, with `proposer` (or none).
fn generate(
    model: &str,
    proposer: Option<Box<dyn Proposer>>,
    prompts: &[Vec<u32>],
) -> Vec<Vec<u32>> {
    let config = EngineConfig {
        page_size: 16,
        kv_cache_memory_bytes: 256 << 20,
        max_num_batched_tokens: 512,
        max_num_seqs: 16,
        prefill_per_decode: 2,
        scheduling_policy: Default::default(),
        enable_prefix_caching: true,
        window_kv_pool: true,
        state_cache: Default::default(),
        max_model_len: Some(1024),
        eos_token_ids: vec![],
        speculation: SpecOptions {
            num_tokens: 4,
            adaptive: false,
            disable_by_batch_size: None,
        },
    };
    let stats = Arc::new(EngineStats::default());
    let mut core = build_engine_core(&config, Box::new(backend(model)), proposer, stats).unwrap();
    for (id, prompt) in prompts.iter().enumerate() {
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
    }
    let mut outputs = vec![Vec::new(); prompts.len()];
    while core.has_work() {
        for out in core.step() {
            outputs[out.id as usize].extend(out.tokens);
        }
    }
    if let Some(spec) = core.speculation() {
        assert!(spec.counters.num_draft_tokens > 0, "nothing was drafted");
    }
    outputs
}

fn check(model: &str, fixture: &str, proposer: impl Fn() -> Box<dyn Proposer>) {
    let prompts = prompts(fixture);
    let plain = generate(model, None, &prompts);
    let batched = generate(model, Some(proposer()), &prompts);
    assert_eq!(
        plain, batched,
        "{model}: batched speculative output differs"
    );
    for (i, prompt) in prompts.iter().enumerate().take(2) {
        let alone = generate(model, Some(proposer()), std::slice::from_ref(prompt));
        assert_eq!(alone[0], plain[i], "{model}: prompt {i} alone differs");
    }
}

#[test]
fn smollm2_with_ngram_and_a_draft_model_is_plain_greedy() {
    check(SMOLLM2, "smollm2.json", || {
        Box::new(NgramProposer::default())
    });
    check(SMOLLM2, "smollm2.json", || {
        Box::new(DraftModel::new(Box::new(backend(SMOLLM2))).unwrap())
    });
    // A draft that scores only the first 2,000 of 49,152 ids proposes worse tokens, never
    // wrong output.
    check(SMOLLM2, "smollm2.json", || {
        let mut draft = backend(SMOLLM2);
        draft.limit_logits(2_000);
        Box::new(DraftModel::new(Box::new(draft)).unwrap())
    });
}

#[test]
fn qwen_with_ngram_and_suffix_decoding_is_plain_greedy() {
    check(QWEN, "qwen2.5-coder-0.5b.json", || {
        Box::new(NgramProposer::default())
    });
    check(QWEN, "qwen2.5-coder-0.5b.json", || {
        Box::new(SuffixProposer::new(Default::default()))
    });
}
