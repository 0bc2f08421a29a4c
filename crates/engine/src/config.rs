//! How an engine is configured: pool, batch and context limits, EOS ids, speculation.

/// The most drafts per step the engine accepts (and reports per position).
pub const MAX_SPEC_TOKENS: usize = 32;

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Tokens per KV page.
    pub page_size: usize,
    /// Bytes the KV pool may take; the number of pages follows from the backend's bytes per token.
    pub kv_cache_memory_bytes: usize,
    /// Per-step token budget shared by prefill chunks and decodes.
    pub max_num_batched_tokens: usize,
    /// Running sequences at most.
    pub max_num_seqs: usize,
    /// While sequences decode, prompt tokens per step at most this many per decoding sequence
    /// (at least `MIN_PREFILL_CHUNK`); 0 = only the step budget limits them.
    pub prefill_per_decode: usize,
    /// Which waiting request is admitted first and which running one is preempted.
    pub scheduling_policy: SchedulingPolicy,
    pub enable_prefix_caching: bool,
    /// Keep the sliding-window layers' pages in a pool of their own, given back once behind
    /// every query's window (where the backend can: `Backend::kv_window`).
    pub window_kv_pool: bool,
    /// Snapshots of recurrent state kept with cached pages (models with linear-attention
    /// layers; no effect on others).
    pub state_cache: StateCacheOptions,
    /// Longest prompt + output; `None`: the model's trained context, capped by what the pool holds.
    pub max_model_len: Option<usize>,
    /// Tokens that end a generation unless `ignore_eos`.
    pub eos_token_ids: Vec<u32>,
    /// Speculative decoding, when a proposer is given to `spawn_engine`.
    pub speculation: SpecOptions,
}

/// The order of admission and preemption (vLLM's `--scheduling-policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchedulingPolicy {
    /// First come, first served; the newest running request is preempted first.
    #[default]
    Fcfs,
    /// By each request's `priority` (lower first), then arrival; the running request of the
    /// highest value (the latest among equals) is preempted first.
    Priority,
}

/// How a model with recurrent state (linear-attention layers) keeps its state for the prefix
/// cache: snapshots after page-aligned prefixes, in memory of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateCacheOptions {
    /// Bytes for snapshots (each one sequence's whole state); 0 turns prefix caching off for
    /// such a model.
    pub memory_bytes: usize,
    /// A snapshot is taken where a sequence's computed tokens reach a multiple of this
    /// (rounded up to whole pages): the finer, the more of a prefix a hit reuses, the more
    /// snapshots (and copies) it costs.
    pub snapshot_interval: usize,
}

impl Default for StateCacheOptions {
    fn default() -> Self {
        Self {
            memory_bytes: 0,
            snapshot_interval: 64,
        }
    }
}

/// How speculative decoding runs (when there is a proposer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecOptions {
    /// Drafts per sequence and step, at most (1..=[`MAX_SPEC_TOKENS`]).
    pub num_tokens: usize,
    /// Choose k each step by measured cost (0 = plain decoding); else always `num_tokens`.
    pub adaptive: bool,
    /// Decode plainly in steps where more than this many sequences are decoding (vLLM's
    /// `speculative_disable_by_batch_size`); `None`: no limit.
    pub disable_by_batch_size: Option<usize>,
}

impl Default for SpecOptions {
    fn default() -> Self {
        Self {
            num_tokens: 4,
            adaptive: true,
            disable_by_batch_size: None,
        }
    }
}
