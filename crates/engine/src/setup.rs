//! Building an engine core from a configuration: the KV pool sized from the memory budget and
//! the backend's bytes per token, the backend's (and a draft model's) caches allocated, the
//! scheduler and speculation wired. [`crate::spawn_engine`] runs the result on its thread.

use std::sync::Arc;

use crate::backend::Backend;
use crate::config::{EngineConfig, MAX_SPEC_TOKENS};
use crate::engine_loop::EngineCore;
use crate::error::EngineError;
use crate::kv::KvManager;
use crate::scheduler::{Scheduler, SchedulerConfig};
use crate::speculative::{Proposer, Speculation};
use crate::stats::EngineStats;

/// Pool size and context limit that `config` and `backend` allow: `(num_pages, max_model_len)`.
/// `draft_kv_bytes_per_token`: what a speculative proposer keeps per token in its own cache.
pub fn size_kv_pool(
    config: &EngineConfig,
    backend: &dyn Backend,
    draft_kv_bytes_per_token: usize,
) -> Result<(usize, usize), EngineError> {
    let invalid = |why: String| Err(EngineError::Config(why));
    if config.page_size == 0 || config.max_num_seqs == 0 || config.max_num_batched_tokens == 0 {
        return invalid("page_size, max_num_seqs and max_num_batched_tokens must be >= 1".into());
    }
    let bytes_per_token = backend.kv_bytes_per_token() + draft_kv_bytes_per_token;
    if bytes_per_token == 0 {
        return invalid("the backend reports 0 KV bytes per token".into());
    }
    let bytes_per_page = config.page_size.saturating_mul(bytes_per_token);
    // Each running sequence's recurrent state (linear-attention layers) comes out of the
    // same budget, one slot per seat, and so do the prefix cache's snapshots of it.
    let per_sequence = backend.state_bytes_per_sequence();
    let snapshot_bytes = if per_sequence > 0 && config.enable_prefix_caching {
        config.state_cache.memory_bytes / per_sequence * per_sequence
    } else {
        0
    };
    let state_bytes = per_sequence
        .saturating_mul(config.max_num_seqs)
        .saturating_add(snapshot_bytes);
    if state_bytes >= config.kv_cache_memory_bytes {
        return invalid(format!(
            "KV cache memory {} B does not hold the recurrent state of {} sequences and its \
             snapshots ({state_bytes} B); give it more memory, lower max_num_seqs or \
             --state-cache-memory",
            config.kv_cache_memory_bytes, config.max_num_seqs
        ));
    }
    let page_bytes = config.kv_cache_memory_bytes - state_bytes;
    let num_pages = (page_bytes / bytes_per_page).min(u32::MAX as usize);
    if num_pages == 0 {
        return invalid(format!(
            "KV cache memory {} B holds no page of {} tokens ({bytes_per_page} B)",
            config.kv_cache_memory_bytes, config.page_size
        ));
    }
    let pool_tokens = num_pages * config.page_size;
    let max_model_len = match config.max_model_len {
        Some(asked) if asked > pool_tokens => {
            return invalid(format!(
                "max_model_len {asked} exceeds the {pool_tokens} tokens the KV cache holds; \
                 give it more memory or lower max_model_len"
            ))
        }
        Some(0) => return invalid("max_model_len must be >= 1".into()),
        Some(asked) => asked,
        None => backend.max_context_len().min(pool_tokens),
    };
    if max_model_len < 2 {
        return invalid(format!(
            "max_model_len {max_model_len} leaves no room to generate"
        ));
    }
    Ok((num_pages, max_model_len))
}

/// The engine without its thread, sized and initialised exactly as [`spawn_engine`] does it:
/// for tests and benchmarks that want to drive steps themselves ([`EngineCore::step`]).
pub fn build_engine_core(
    config: &EngineConfig,
    mut backend: Box<dyn Backend>,
    proposer: Option<Box<dyn Proposer>>,
    stats: Arc<EngineStats>,
) -> Result<EngineCore, EngineError> {
    let spec = config.speculation;
    if proposer.is_some() && !(1..=MAX_SPEC_TOKENS).contains(&spec.num_tokens) {
        return Err(EngineError::Config(format!(
            "num_speculative_tokens must be in 1..={MAX_SPEC_TOKENS}, got {}",
            spec.num_tokens
        )));
    }
    let draft_bytes = proposer.as_ref().map_or(0, |p| p.kv_bytes_per_token());
    let (num_pages, max_model_len) = size_kv_pool(config, backend.as_ref(), draft_bytes)?;
    let state_slots = if backend.state_bytes_per_sequence() > 0 {
        if proposer.is_some() {
            return Err(EngineError::Config(
                "speculative decoding does not run on models with linear-attention layers yet \
                 (a rejected draft would have to be taken out of their recurrent state)"
                    .into(),
            ));
        }
        let snapshots = if config.enable_prefix_caching {
            config.state_cache.memory_bytes / backend.state_bytes_per_sequence()
        } else {
            0
        };
        if config.enable_prefix_caching && snapshots == 0 {
            tracing::warn!(
                state_bytes = backend.state_bytes_per_sequence(),
                "prefix caching is off: the state cache memory holds no snapshot of this \
                 model's recurrent state"
            );
        }
        tracing::info!(
            snapshots,
            interval = config.state_cache.snapshot_interval,
            "recurrent state: one slot per sequence, snapshots kept with cached pages"
        );
        backend.init_state_slots(config.max_num_seqs + snapshots)?;
        (config.max_num_seqs, snapshots)
    } else {
        (0, 0)
    };
    // After the state slots: a backend may capture graphs that read them.
    backend.init_kv_cache(num_pages, config.page_size)?;
    let speculation = match proposer {
        Some(mut proposer) => {
            proposer.init_kv_cache(num_pages, config.page_size)?;
            let mut speculation = Speculation::new(proposer, spec.num_tokens, spec.adaptive);
            speculation.disable_by_batch_size = spec.disable_by_batch_size;
            Some(speculation)
        }
        None => None,
    };
    let scheduler = Scheduler::new(
        SchedulerConfig {
            max_num_batched_tokens: config.max_num_batched_tokens,
            max_num_seqs: config.max_num_seqs,
            prefill_per_decode: config.prefill_per_decode,
        },
        KvManager::new(num_pages, config.page_size, config.enable_prefix_caching).with_state_slots(
            state_slots.0,
            state_slots.1,
            config.state_cache.snapshot_interval,
        ),
    );
    let mut core = EngineCore::new(
        scheduler,
        backend,
        config.eos_token_ids.clone(),
        max_model_len,
        stats,
    );
    if let Some(speculation) = speculation {
        core.set_speculation(speculation);
    }
    Ok(core)
}
