//! Building an engine core from a configuration: the KV pool sized from the memory budget and
//! the backend's bytes per token, the backend's (and a draft model's) caches allocated, the
//! scheduler and speculation wired. [`crate::spawn_engine`] runs the result on its thread.

use std::sync::Arc;

use crate::backend::{Backend, KvWindow};
use crate::config::{EngineConfig, MAX_SPEC_TOKENS};
use crate::engine_loop::EngineCore;
use crate::error::EngineError;
use crate::kv::KvManager;
use crate::scheduler::{Scheduler, SchedulerConfig};
use crate::speculative::{Proposer, Speculation};
use crate::stats::EngineStats;

/// The KV pools `config` and `backend` allow, and the context limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvPoolSizes {
    pub num_pages: usize,
    /// The sliding-window layers' pool, when they keep pages apart: (window, pages).
    pub window: Option<(usize, usize)>,
    pub max_model_len: usize,
}

/// Pool sizes and context limit that `config` and `backend` allow. `speculation`: with
/// speculative decoding on, what its proposer keeps per token in its own cache.
pub fn size_kv_pool(
    config: &EngineConfig,
    backend: &dyn Backend,
    speculation: Option<usize>,
) -> Result<KvPoolSizes, EngineError> {
    let draft_kv_bytes_per_token = speculation.unwrap_or(0);
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
    // same budget, one slot per seat (and what rewinding a step takes, when speculating), and
    // so do the prefix cache's snapshots of it.
    let per_sequence = backend.state_bytes_per_sequence();
    let per_seat = match speculation {
        Some(_) if per_sequence > 0 => {
            let step_tokens = config.speculation.num_tokens + 1;
            let rewind = backend.state_rewind_bytes_per_sequence(step_tokens);
            per_sequence + rewind.unwrap_or(0)
        }
        _ => per_sequence,
    };
    let snapshot_bytes = if per_sequence > 0 && config.enable_prefix_caching {
        config.state_cache.memory_bytes / per_sequence * per_sequence
    } else {
        0
    };
    let state_bytes = per_seat
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
    let one_pool = (page_bytes / bytes_per_page).min(u32::MAX as usize);
    let window = backend.kv_window().filter(|_| config.window_kv_pool);
    let (num_pages, window) = match window {
        Some(w) if one_pool > 0 => {
            let max_context = backend.max_context_len();
            let (pages, window_pages) =
                split_window_pool(config, max_context, w, bytes_per_token, page_bytes);
            (pages, Some((w.tokens, window_pages)))
        }
        _ => (one_pool, None),
    };
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
    Ok(KvPoolSizes {
        num_pages,
        window,
        max_model_len,
    })
}

/// Splits `page_bytes` between the sliding-window layers' pool and the other layers' pool:
/// the window pool gets what the running sequences' windows need at most (each its window and
/// a page either side, plus a step's tokens), twice over so the prefix cache can keep some,
/// but never more pages than one shared pool of `bytes_per_token` a token would have had; the
/// rest goes to the other layers, whose pages now cost only their share. Returns
/// `(pages, window_pages)`.
fn split_window_pool(
    config: &EngineConfig,
    max_context_len: usize,
    window: KvWindow,
    bytes_per_token: usize,
    page_bytes: usize,
) -> (usize, usize) {
    let ps = config.page_size;
    let one_pool = page_bytes / (ps * bytes_per_token);
    let per_sequence = window.tokens.saturating_sub(1).div_ceil(ps) + 2;
    let live = config
        .max_num_seqs
        .saturating_mul(per_sequence)
        .saturating_add(config.max_num_batched_tokens.div_ceil(ps));
    let window_pages = live.saturating_mul(2).min(one_pool);
    let window_bytes = window_pages * ps * window.bytes_per_token;
    let pages = match ps * bytes_per_token.saturating_sub(window.bytes_per_token) {
        // Every layer is windowed (Mistral 7B): a page of the other pool costs nothing, so
        // there are as many as every seat at the model's full context needs, twice.
        0 => config
            .max_num_seqs
            .saturating_mul(max_context_len.div_ceil(ps))
            .saturating_mul(2),
        per_page => page_bytes.saturating_sub(window_bytes) / per_page,
    };
    (pages.min(MAX_PAGES), window_pages)
}

/// Page ids are u32, and a pool's bookkeeping is a few bytes a page: at most 2^26 pages.
const MAX_PAGES: usize = 1 << 26;

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
    if let Some(proposer) = &proposer {
        proposer.prepare_target(backend.as_mut())?;
    }
    let speculating = proposer.as_ref().map(|p| p.kv_bytes_per_token());
    let sizes = size_kv_pool(config, backend.as_ref(), speculating)?;
    let (num_pages, max_model_len) = (sizes.num_pages, sizes.max_model_len);
    let recurrent = backend.state_bytes_per_sequence() > 0;
    let state_slots = if recurrent {
        let step_tokens = spec.num_tokens + 1;
        if proposer.is_some()
            && backend
                .state_rewind_bytes_per_sequence(step_tokens)
                .is_none()
        {
            return Err(EngineError::Config(
                "speculative decoding does not run on models with linear-attention layers on \
                 this backend yet (a rejected draft would have to be taken out of their \
                 recurrent state)"
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
        if proposer.is_some() {
            backend.init_state_rewind(config.max_num_seqs, step_tokens)?;
        }
        (config.max_num_seqs, snapshots)
    } else if backend.draft_head_needs_slots() {
        // A slot per seat for the draft head's rows; no recurrent state, no snapshots.
        backend.init_state_slots(config.max_num_seqs)?;
        (config.max_num_seqs, 0)
    } else {
        (0, 0)
    };
    // The window pool first, then the other: a backend may capture graphs that read both
    // (and the state slots).
    if let Some((window, pages)) = sizes.window {
        tracing::info!(
            window,
            window_pages = pages,
            pages = num_pages,
            "sliding-window layers keep pages of their own, given back behind the window"
        );
        // The window pool's page 0 is the null page the engine never hands out.
        backend.init_window_kv_cache(pages + 1)?;
    }
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
            policy: config.scheduling_policy,
        },
        kv_manager(config, &sizes, state_slots, recurrent),
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

/// The KV manager: `state_slots` (seats, snapshots) hold recurrent state when `recurrent`,
/// else only a draft head's rows (seats without snapshots: prefix caching stays on).
fn kv_manager(
    config: &EngineConfig,
    sizes: &KvPoolSizes,
    state_slots: (usize, usize),
    recurrent: bool,
) -> KvManager {
    let kv = KvManager::new(
        sizes.num_pages,
        config.page_size,
        config.enable_prefix_caching,
    );
    let kv = match recurrent {
        true => kv.with_state_slots(
            state_slots.0,
            state_slots.1,
            config.state_cache.snapshot_interval,
        ),
        false => kv.with_seat_slots(state_slots.0),
    };
    match sizes.window {
        Some((window, pages)) => kv.with_window_pages(window, pages),
        None => kv,
    }
}
