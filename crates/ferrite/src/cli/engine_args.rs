//! The flags of every command that runs a model: where and how the engine runs it, its memory
//! and speculative decoding.

use clap::{Args, ValueEnum};
use ferrite_model::mapping::MapPages;

use super::heading;
use crate::byte_size::parse_byte_size;

/// Where the forward pass runs.
/// `--scheduling-policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchedulingPolicyArg {
    Fcfs,
    Priority,
}

impl From<SchedulingPolicyArg> for ferrite_engine::SchedulingPolicy {
    fn from(arg: SchedulingPolicyArg) -> Self {
        match arg {
            SchedulingPolicyArg::Fcfs => Self::Fcfs,
            SchedulingPolicyArg::Priority => Self::Priority,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Device {
    /// This machine's cores.
    Cpu,
    /// An NVIDIA GPU (compute capability 9.0 kernels; the CUDA driver and cuBLAS are loaded at
    /// run time).
    Cuda,
}

/// How the weights are obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LoadFormat {
    /// Read them from the model file or directory.
    Auto,
    /// Random weights of the model's real shapes (the model is a preset: qwen2.5-0.5b,
    /// qwen2.5-1.5b, llama-3.1-8b, tiny; or a config.json), for measuring speed without the
    /// real weights. Without --tokenizer a byte-level tokenizer with a ChatML template is used.
    Dummy,
}

/// A weight quantization applied at load (`--quantization`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Quantization {
    /// FP8 e4m3, one scale per output channel.
    Fp8,
}

/// How the engine runs the model (shared by the commands that run one). The fields are in
/// `--help` order: each heading's flags together, the headings in `heading`'s order.
#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// Longest prompt + completion in tokens [default: the model's trained context, capped by
    /// what the KV cache holds]. More than the model's own limit (config.json's
    /// max_position_embeddings, a GGUF's context_length) is refused at start, as vLLM does;
    /// FERRITE_ALLOW_LONG_MAX_MODEL_LEN=1 allows it (positions the model was never trained on
    /// give poor or garbled text).
    #[arg(long, help_heading = heading::MODEL)]
    pub max_model_len: Option<usize>,
    /// How the weights are obtained.
    #[arg(long, value_enum, default_value_t = LoadFormat::Auto, help_heading = heading::MODEL)]
    pub load_format: LoadFormat,
    /// Seed of the `--load-format dummy` weights (the same seed gives the same weights on
    /// every device).
    #[arg(long, default_value_t = 0, help_heading = heading::MODEL)]
    pub dummy_seed: u64,
    /// The revision (branch, tag or commit) of a hub-id model [default: main].
    #[arg(long, help_heading = heading::MODEL)]
    pub revision: Option<String>,
    /// Where hub models are downloaded (and looked for): the Hugging Face cache directory
    /// itself, as vLLM's flag [default: $HF_HUB_CACHE, else $HF_HOME/hub, else
    /// ~/.cache/huggingface/hub].
    #[arg(long, value_name = "DIR", help_heading = heading::MODEL)]
    pub download_dir: Option<std::path::PathBuf>,
    /// Tokenizer for `--load-format dummy`: a .gguf file or a directory with tokenizer.json.
    #[arg(long, help_heading = heading::MODEL)]
    pub tokenizer: Option<String>,
    /// Quantize a float checkpoint's linear layers (attention and MLP projections, experts)
    /// at load: `fp8` = FP8 e4m3 with one scale per output channel, as vLLM's `--quantization
    /// fp8`. The weights stay FP8 in memory (half of bf16 on CUDA, whose decode GEMVs read
    /// them as FP8; a quarter of f32 on the CPU); the embedding and output projection keep
    /// their type. Logits move by the weights' FP8 rounding. Files already quantized (GGUF
    /// quantized types, FP8 checkpoints, which load as FP8 without this flag) are refused.
    #[arg(long, value_enum, help_heading = heading::MODEL)]
    pub quantization: Option<Quantization>,

    /// Where the forward pass runs.
    #[arg(long, value_enum, default_value_t = Device::Cpu, help_heading = heading::ENGINE)]
    pub device: Device,
    /// CPU threads for the forward pass [default: all cores].
    #[arg(long, help_heading = heading::ENGINE)]
    pub threads: Option<usize>,
    /// Sequences running at once, at most.
    #[arg(long, default_value_t = 64, help_heading = heading::ENGINE)]
    pub max_num_seqs: usize,
    /// Tokens per scheduler step, shared by prefill chunks and decodes [default: 2048 on the
    /// CPU, 8192 on CUDA (vLLM's default on large GPUs): a GGUF-quantized matrix is widened
    /// to bf16 once per prompt chunk, so bigger chunks widen it less often]
    #[arg(long, help_heading = heading::ENGINE)]
    pub max_num_batched_tokens: Option<usize>,
    /// While sequences are decoding, a step takes at most max(16, R x decoding sequences)
    /// prompt tokens, so that arriving prompts slow the running streams by a bounded factor
    /// (on a CPU a step's time grows with its tokens); 0 = only --max-num-batched-tokens.
    /// [default: 3 on the CPU, 0 on CUDA]
    #[arg(long, help_heading = heading::ENGINE)]
    pub prefill_per_decode: Option<usize>,
    /// Which waiting request runs first, and which running one gives its KV pages up when
    /// they run short (vLLM's flag): `fcfs`, in order of arrival, the newest preempted first;
    /// `priority`, by each request's `priority` field (lower first, then arrival), the least
    /// urgent preempted first. Under `fcfs` a request with a nonzero `priority` is a 400.
    #[arg(long, value_enum, default_value_t = SchedulingPolicyArg::Fcfs, help_heading = heading::ENGINE)]
    pub scheduling_policy: SchedulingPolicyArg,
    /// Make a request's tokens independent of what shares its step (`--device cuda`; the CPU
    /// backend always is): every bf16 product sums in one fixed order whatever the batch,
    /// decode attention splits each sequence by its own length (docs/architecture.md, "Batch
    /// invariance"). Without it, cuBLAS multiplies prompt chunks and batches, decode attention
    /// splits by the batch, and FP8 weights multiply them on the FP8 tensor cores with
    /// activations quantized per token, so greedy output may differ between a request alone
    /// and batched at a near-tie. It costs speed, most on quantized weights, at many streams
    /// and in prefill (measured: docs/performance.md, '2026-12-05 13:11-13:14 UTC').
    #[arg(long, help_heading = heading::ENGINE)]
    pub batch_invariant: bool,
    /// No CUDA graphs: launch every kernel of every step (`--device cuda`).
    #[arg(long, help_heading = heading::ENGINE)]
    pub enforce_eager: bool,
    /// Largest decode batch captured as a CUDA graph (`--device cuda`); larger batches run
    /// eagerly.
    #[arg(long, default_value_t = 512, help_heading = heading::ENGINE)]
    pub cuda_graph_max_bs: usize,
    /// CPU: multiply Q4_K and Q6_K weights by activations rounded to int8 per block of 256
    /// (integer dot products, AVX-512 VNNI), as llama.cpp does: faster decode, but the logits
    /// leave the float32 reference (greedy text can change; both measured in
    /// docs/performance.md). Other weight types keep the exact f32 path. [default: off]
    #[arg(long, help_heading = heading::ENGINE)]
    pub int8_activations: bool,
    /// CPU: steps of more than 16 tokens (prompt processing, large batches) multiply on Intel
    /// AMX tiles in bf16: inputs and weights rounded to bf16, sums in f32 — 2-3x the exact
    /// path's prompt speed. One-token steps of Q4_K and Q6_K matrices round only the inputs
    /// to bf16 (AVX-512 BF16 dot products on the weights' integer quants); other decode-sized
    /// steps keep the exact kernels. A request's logits can depend on how many tokens share
    /// its step. Error against transformers float32:
    /// mean |Δ logprob| 0.004-0.008 on the test models (exact: 0.0000; int8 activations:
    /// 0.010-0.036), measured in docs/performance.md. Needs AMX (Sapphire Rapids or later).
    /// [default: off]
    #[arg(long, help_heading = heading::ENGINE, conflicts_with = "int8_activations")]
    pub amx_bf16: bool,
    /// CPU: map the weight files in the kernel's default 4 KiB pages. By default ferrite asks
    /// Linux for 2 MiB pages (transparent huge pages) and, if the page cache holds the file in
    /// 4 KiB pages, reads it again once, at load: decode reads every weight every token, and
    /// scattered reads such as a mixture of experts' run faster from huge pages (measured:
    /// docs/performance.md, '2026-12-05 06:40-07:27 UTC, MoE decode: weights in 2 MiB pages').
    #[arg(long, help_heading = heading::ENGINE)]
    pub no_huge_pages: bool,

    /// Fraction of the GPU's memory ferrite may use (weights, activations and the KV cache,
    /// which gets what is left) with `--device cuda`.
    #[arg(long, default_value_t = 0.9, help_heading = heading::MEMORY)]
    pub gpu_memory_utilization: f64,
    /// Memory for the KV cache: bytes, or with a suffix (512MiB, 1GiB, 2GB) [default: 1GiB on
    /// the CPU; on a GPU what --gpu-memory-utilization leaves after weights and activations].
    #[arg(long, value_parser = parse_byte_size, help_heading = heading::MEMORY)]
    pub kv_cache_memory: Option<usize>,
    /// Tokens per KV cache page.
    #[arg(long, default_value_t = 16, help_heading = heading::MEMORY)]
    pub page_size: usize,
    /// Do not share KV pages of common prompt prefixes between requests.
    #[arg(long, help_heading = heading::MEMORY)]
    pub no_prefix_caching: bool,
    /// Keep every layer's K/V in one pool of pages. By default the sliding-window layers
    /// (Gemma 3's local layers, gpt-oss's banded ones, Mistral 7B's) keep pages of their own
    /// and give them back once they fall behind the window, so longer contexts and more
    /// sequences fit. (vLLM's `--disable-hybrid-kv-cache-manager` is the same switch.)
    #[arg(long, visible_alias = "disable-hybrid-kv-cache-manager", help_heading = heading::MEMORY)]
    pub no_window_kv_pool: bool,
    /// Models with linear-attention layers (Qwen3.5, Qwen3-Next): memory for snapshots of
    /// their recurrent state, kept with cached pages so that a prefix hit skips the cached
    /// part; bytes or with a suffix; 0 turns prefix caching off for them [default: a quarter
    /// of the KV cache memory, taken out of it].
    #[arg(long, value_parser = parse_byte_size, help_heading = heading::MEMORY)]
    pub state_cache_memory: Option<usize>,
    /// Models with linear-attention layers: snapshot their state every this many tokens of a
    /// sequence (rounded up to whole pages). Finer reuses more of a prefix on a hit and costs
    /// more snapshots.
    #[arg(long, default_value_t = 64, help_heading = heading::MEMORY)]
    pub state_snapshot_interval: usize,

    #[command(flatten)]
    pub speculation: SpecArgs,
}

impl EngineArgs {
    /// The pages the weight files are mapped in: 2 MiB for the CPU backend, which streams
    /// them from memory every step; the GPU copies them once.
    pub fn map_pages(&self) -> MapPages {
        match self.device {
            Device::Cpu if !self.no_huge_pages => MapPages::Huge,
            _ => MapPages::Plain,
        }
    }
}

/// Where speculative tokens come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SpecMethod {
    /// Prompt lookup: propose what followed the last occurrence of the latest tokens (no model).
    Ngram,
    /// A smaller model with the same tokenizer (--draft-model).
    Draft,
    /// Suffix decoding: continuations read from suffix tries over the request's own tokens
    /// and this server's recent outputs (no model), as long as they are likely to be kept.
    Suffix,
    /// The model's own multi-token-prediction layer (the `mtp.*` tensors Qwen3.5 / Qwen3.6
    /// checkpoints ship), run beside it (CPU and CUDA).
    Mtp,
    /// An EAGLE-3 head trained for the model (--draft-model: its directory or hub id, in the
    /// EAGLE / SpecForge or the speculators layout), reading three of the model's hidden
    /// states (CPU; CUDA not yet).
    Eagle3,
}

impl SpecMethod {
    /// --num-speculative-tokens when not given: suffix decoding chooses each step how many of
    /// its drafts pay, so it may offer many.
    pub fn default_num_tokens(self) -> usize {
        match self {
            SpecMethod::Ngram | SpecMethod::Draft => 4,
            // One layer run again for each further draft: later drafts are kept less often.
            SpecMethod::Mtp | SpecMethod::Eagle3 => 3,
            SpecMethod::Suffix => 24,
        }
    }
}

/// Speculative decoding: drafts checked by the model in one pass; outputs keep the model's
/// distribution exactly (greedy output is identical), only speed changes.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = heading::SPECULATIVE)]
pub struct SpecArgs {
    /// Decode speculatively with this proposer [default: off].
    #[arg(long, value_enum)]
    pub speculative: Option<SpecMethod>,
    /// Drafts per sequence and step, at most [default: 4; 3 for mtp and eagle3; 24 for
    /// suffix].
    #[arg(long)]
    pub num_speculative_tokens: Option<usize>,
    /// Always draft --num-speculative-tokens tokens, instead of choosing 0..=K each step by
    /// measured cost (the default turns speculation off where it would be a loss).
    #[arg(long)]
    pub speculative_fixed_k: bool,
    /// The draft model for `--speculative draft`: a GGUF file, a Hugging Face directory or a hub
    /// id, sharing the model's vocabulary; for `--speculative eagle3`, the head's directory or
    /// hub id.
    #[arg(long)]
    pub draft_model: Option<String>,
    /// `--speculative draft`: the draft model scores only the first N token ids (BPE ids run
    /// roughly from common to rare), so its LM head, a large part of a small model's step,
    /// costs N/vocabulary as much. Exactness is unaffected: the target verifies every draft
    /// against the draft's actual (restricted) distribution. [default: the whole vocabulary]
    #[arg(long, value_name = "N")]
    pub draft_vocab: Option<usize>,
    /// Decode without speculation in steps where more than N sequences are decoding (vLLM's
    /// option of the same name); 0: no limit. [default: 2 on the CPU, where verification rows
    /// cost nearly full price in larger batches (measured, docs/performance.md); no limit on
    /// CUDA]
    #[arg(long, value_name = "N")]
    pub speculative_disable_by_batch_size: Option<usize>,
    /// `--speculative ngram`: shortest run of latest tokens to look up.
    #[arg(long, default_value_t = 2)]
    pub prompt_lookup_min: usize,
    /// `--speculative ngram`: longest run of latest tokens to look up (tried first).
    #[arg(long, default_value_t = 4)]
    pub prompt_lookup_max: usize,
    /// `--speculative suffix`: longest substring the suffix tries index, so the longest
    /// context matched (memory: at most 16 bytes x this per token indexed).
    #[arg(long, default_value_t = 24)]
    pub suffix_max_depth: usize,
    /// `--speculative suffix`: output tokens of finished requests kept to draft from (the
    /// oldest requests are dropped first); 0: draft from each request's own tokens only.
    #[arg(long, default_value_t = 1 << 18)]
    pub suffix_cache_tokens: usize,
}

impl SpecArgs {
    /// The drafts per step asked for, or the method's default.
    pub fn num_tokens(&self) -> usize {
        self.num_speculative_tokens
            .unwrap_or_else(|| self.speculative.map_or(4, SpecMethod::default_num_tokens))
    }
}
