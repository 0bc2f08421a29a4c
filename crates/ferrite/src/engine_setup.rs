//! Building the backend and the engine from the command-line flags.

use std::sync::mpsc::{channel, Receiver};

use anyhow::{bail, Context};
use ferrite_cpu::CpuBackend;
use ferrite_engine::spec::{ngram::NgramConfig, DraftModel, NgramProposer, Proposer};
use ferrite_engine::{
    spawn_engine, Backend, EngineConfig, EngineHandle, EngineStep, SpecOptions, MAX_SPEC_TOKENS,
};

use crate::cli::{EngineArgs, SpecArgs, SpecMethod};
use crate::model_source::{self, LoadedModel};

pub struct RunningEngine {
    pub handle: EngineHandle,
    pub outputs: Receiver<EngineStep>,
    pub vocab_size: usize,
}

/// Consumes the weights: they move into the backend, which moves into the scheduler thread.
pub fn start_engine(model: &mut LoadedModel, args: &EngineArgs) -> anyhow::Result<RunningEngine> {
    let threads = args.threads.unwrap_or(0);
    let weights = std::mem::take(&mut model.weights);
    let backend = CpuBackend::new(model.config.clone(), weights, threads)?;
    let vocab_size = backend.vocab_size();
    let config = EngineConfig {
        page_size: args.page_size,
        kv_cache_memory_bytes: args.kv_cache_memory,
        max_num_batched_tokens: args.max_num_batched_tokens,
        max_num_seqs: args.max_num_seqs,
        prefill_per_decode: args.prefill_per_decode,
        enable_prefix_caching: !args.no_prefix_caching,
        max_model_len: args.max_model_len,
        eos_token_ids: model.tokenizer.eos_token_ids.clone(),
        speculation: SpecOptions {
            num_tokens: args.speculation.num_speculative_tokens,
            adaptive: !args.speculation.speculative_fixed_k,
        },
    };
    let proposer = build_proposer(&args.speculation, vocab_size, threads)?;
    let (tx, outputs) = channel();
    let handle = spawn_engine(config, Box::new(backend), proposer, tx)?;
    Ok(RunningEngine {
        handle,
        outputs,
        vocab_size,
    })
}

/// The speculative proposer the flags ask for, if any.
fn build_proposer(
    args: &SpecArgs,
    vocab_size: usize,
    threads: usize,
) -> anyhow::Result<Option<Box<dyn Proposer>>> {
    let Some(method) = args.speculative else {
        if args.draft_model.is_some() {
            bail!("--draft-model needs --speculative draft");
        }
        return Ok(None);
    };
    if !(1..=MAX_SPEC_TOKENS).contains(&args.num_speculative_tokens) {
        bail!("--num-speculative-tokens must be in 1..={MAX_SPEC_TOKENS}");
    }
    Ok(Some(match method {
        SpecMethod::Ngram => {
            let (min_n, max_n) = (args.prompt_lookup_min, args.prompt_lookup_max);
            if min_n == 0 || min_n > max_n {
                bail!("need 1 <= --prompt-lookup-min <= --prompt-lookup-max");
            }
            Box::new(NgramProposer {
                config: NgramConfig { min_n, max_n },
            })
        }
        SpecMethod::Draft => {
            let path = args
                .draft_model
                .as_deref()
                .context("--speculative draft needs --draft-model PATH")?;
            let draft = model_source::load(Some(path))
                .with_context(|| format!("loading the draft model {path}"))?;
            let backend = CpuBackend::new(draft.config, draft.weights, threads)?;
            // Draft and model must number tokens alike: token ids cross between them.
            if backend.vocab_size() != vocab_size {
                bail!(
                    "the draft model's vocabulary ({}) differs from the model's ({vocab_size}): \
                     it needs the same tokenizer",
                    backend.vocab_size()
                );
            }
            tracing::info!(draft = path, "speculative decoding with a draft model");
            Box::new(DraftModel::new(Box::new(backend)))
        }
    }))
}
