//! Command-line interface: `ferrite serve`, `run-batch`, `generate`, `bench` and `bench-model`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use ferrite_bench::{LenRange, Slo};

use crate::byte_size::parse_byte_size;

#[derive(Debug, Parser)]
#[command(
    name = "ferrite",
    version,
    about = "An LLM inference engine with an OpenAI-compatible server"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve a model over the OpenAI HTTP API.
    Serve(ServeArgs),
    /// Run a file of requests in the OpenAI Batch format through the engine, in-process (no
    /// HTTP server), writing one result line per request; resumable.
    RunBatch(RunBatchArgs),
    /// Generate one completion and print it as it is produced.
    Generate(GenerateArgs),
    /// Load-test an OpenAI-compatible server (ferrite, llama-server, vLLM, SGLang) and report
    /// throughput, TTFT / ITL / TPOT / end-to-end latency, goodput and prefix-cache reuse.
    Bench(BenchArgs),
    /// Measure a model's prefill and decode speed in-process, without HTTP (like llama-bench).
    BenchModel(BenchModelArgs),
}

/// Where the forward pass runs.
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

/// How the engine runs the model (shared by the commands that run one).
#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// Where the forward pass runs.
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    pub device: Device,
    /// How the weights are obtained.
    #[arg(long, value_enum, default_value_t = LoadFormat::Auto)]
    pub load_format: LoadFormat,
    /// Seed of the `--load-format dummy` weights (the same seed gives the same weights on
    /// every device).
    #[arg(long, default_value_t = 0)]
    pub dummy_seed: u64,
    /// The revision (branch, tag or commit) of a hub-id model [default: main].
    #[arg(long)]
    pub revision: Option<String>,
    /// Tokenizer for `--load-format dummy`: a .gguf file or a directory with tokenizer.json.
    #[arg(long)]
    pub tokenizer: Option<String>,
    /// Fraction of the GPU's memory ferrite may use (weights, activations and the KV cache,
    /// which gets what is left) with `--device cuda`.
    #[arg(long, default_value_t = 0.9)]
    pub gpu_memory_utilization: f64,
    /// Largest decode batch captured as a CUDA graph (`--device cuda`); larger batches run
    /// eagerly.
    #[arg(long, default_value_t = 512)]
    pub cuda_graph_max_bs: usize,
    /// No CUDA graphs: launch every kernel of every step (`--device cuda`).
    #[arg(long)]
    pub enforce_eager: bool,
    /// Longest prompt + completion in tokens [default: the model's trained context, capped by
    /// what the KV cache holds].
    #[arg(long)]
    pub max_model_len: Option<usize>,
    /// Tokens per KV cache page.
    #[arg(long, default_value_t = 16)]
    pub page_size: usize,
    /// Memory for the KV cache: bytes, or with a suffix (512MiB, 1GiB, 2GB) [default: 1GiB on
    /// the CPU; on a GPU what --gpu-memory-utilization leaves after weights and activations].
    #[arg(long, value_parser = parse_byte_size)]
    pub kv_cache_memory: Option<usize>,
    /// Tokens per scheduler step, shared by prefill chunks and decodes.
    #[arg(long, default_value_t = 2048)]
    pub max_num_batched_tokens: usize,
    /// Sequences running at once, at most.
    #[arg(long, default_value_t = 64)]
    pub max_num_seqs: usize,
    /// While sequences are decoding, a step takes at most max(16, R x decoding sequences)
    /// prompt tokens, so that arriving prompts slow the running streams by a bounded factor
    /// (on a CPU a step's time grows with its tokens); 0 = only --max-num-batched-tokens.
    /// [default: 4 on the CPU, 0 on CUDA]
    #[arg(long)]
    pub prefill_per_decode: Option<usize>,
    /// Do not share KV pages of common prompt prefixes between requests.
    #[arg(long)]
    pub no_prefix_caching: bool,
    /// CPU threads for the forward pass [default: all cores].
    #[arg(long)]
    pub threads: Option<usize>,
    #[command(flatten)]
    pub speculation: SpecArgs,
}

/// Where speculative tokens come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SpecMethod {
    /// Prompt lookup: propose what followed the last occurrence of the latest tokens (no model).
    Ngram,
    /// A smaller model with the same tokenizer (--draft-model).
    Draft,
}

/// Speculative decoding: drafts checked by the model in one pass; outputs keep the model's
/// distribution exactly (greedy output is identical), only speed changes.
#[derive(Debug, Clone, Args)]
pub struct SpecArgs {
    /// Decode speculatively with this proposer [default: off].
    #[arg(long, value_enum)]
    pub speculative: Option<SpecMethod>,
    /// Drafts per sequence and step, at most.
    #[arg(long, default_value_t = 4)]
    pub num_speculative_tokens: usize,
    /// Always draft --num-speculative-tokens tokens, instead of choosing 0..=K each step by
    /// measured cost (the default turns speculation off where it would be a loss).
    #[arg(long)]
    pub speculative_fixed_k: bool,
    /// The draft model for `--speculative draft`: a GGUF file, a Hugging Face directory or a hub
    /// id, sharing the model's vocabulary.
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
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// A GGUF file, a Hugging Face model directory, or a hub id [default: SmolLM2-135M-Instruct,
    /// fetched on first use]. With --load-format dummy: a preset name or a config.json.
    pub model: Option<String>,
    /// The model, as a flag (instead of the positional MODEL).
    #[arg(long = "model", id = "model_flag", conflicts_with = "model")]
    pub model_flag: Option<String>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on.
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// The model name clients use in requests [default: the model file's name].
    #[arg(long)]
    pub served_model_name: Option<String>,
    /// Require `Authorization: Bearer KEY` on the API routes (/health and /metrics stay open).
    #[arg(long, env = "FERRITE_API_KEY")]
    pub api_key: Option<String>,
    /// Requests allowed to wait for a slot; more are answered 503.
    #[arg(long, default_value_t = 1024)]
    pub max_waiting: usize,
    /// Threads that render chat templates and tokenize prompts.
    #[arg(long, default_value_t = 2)]
    pub tokenizer_workers: usize,
    /// Names of the vLLM-defined series on /metrics: `ferrite` (ferrite:num_requests_waiting,
    /// ...) or `vllm` (vllm:num_requests_waiting, ...: what vLLM's dashboards and the Gateway
    /// API Inference Extension read). ferrite's own series keep their ferrite: name.
    #[arg(long, value_enum, default_value_t = MetricsNamesArg::Ferrite)]
    pub metrics_names: MetricsNamesArg,
    /// Log format on stderr: `text` for people, `json` for log pipelines (one object a line).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Add the prompt and output token ids to each finished request's log line.
    #[arg(long)]
    pub log_token_ids: bool,
    /// Add the prompt text (chat template applied) to each finished request's log line; off
    /// by default because prompts are user data.
    #[arg(long)]
    pub log_prompts: bool,
    /// How tool calls are read from the model's output when a chat request has `tools`
    /// (vLLM's names): `hermes` (Qwen2.5, Qwen3, Hermes: <tool_call>{...}</tool_call>),
    /// `llama3_json` (Llama 3.x JSON calls), `mistral` ([TOOL_CALLS][...]), `none` (tools are
    /// refused). [default: detected from the chat template]
    #[arg(long, value_enum)]
    pub tool_call_parser: Option<ToolCallParserArg>,
    /// How reasoning is split from the answer into `reasoning_content` (vLLM's names): `qwen3`
    /// (<think>...</think> when the model opens it), `deepseek_r1` (the answer starts inside
    /// the reasoning, </think> ends it), `none` (all text is content). [default: detected from
    /// the chat template]
    #[arg(long, value_enum)]
    pub reasoning_parser: Option<ReasoningParserArg>,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// `ferrite run-batch`: the model and engine flags are those of `ferrite serve`.
#[derive(Debug, Args)]
pub struct RunBatchArgs {
    /// The requests, one JSON object a line: {"custom_id": "...", "method": "POST", "url":
    /// "/v1/chat/completions" (or "/v1/completions", or another POST route of `ferrite
    /// serve`), "body": {...the request, without stream: true...}}.
    #[arg(short = 'i', long)]
    pub input: PathBuf,
    /// The results, one JSON object a line, in the order requests finish: {"id", "custom_id",
    /// "response": {"status_code", "request_id", "body"}, "error": null}, or "response": null
    /// and an "error" {"code", "message", "param", "line"} for a line that could not be sent.
    /// An existing file is resumed: lines it holds results for are skipped, the others
    /// appended.
    #[arg(short = 'o', long)]
    pub output: PathBuf,
    /// Requests in flight at most [default: twice --max-num-seqs, so that a sequence slot the
    /// engine frees is taken at once by a request already tokenized].
    #[arg(long)]
    pub max_concurrency: Option<usize>,
    /// A GGUF file, a Hugging Face model directory, or a hub id [default: SmolLM2-135M-Instruct,
    /// fetched on first use]. With --load-format dummy: a preset name or a config.json.
    pub model: Option<String>,
    /// The model, as a flag (instead of the positional MODEL).
    #[arg(long = "model", id = "model_flag", conflicts_with = "model")]
    pub model_flag: Option<String>,
    /// The name request bodies may give in `model`; another is answered 404, as `ferrite serve`
    /// answers it [default: the model file's name].
    #[arg(long)]
    pub served_model_name: Option<String>,
    /// Threads that render chat templates and tokenize prompts.
    #[arg(long, default_value_t = 2)]
    pub tokenizer_workers: usize,
    /// How tool calls are read from the model's output, as `ferrite serve
    /// --tool-call-parser` [default: detected from the chat template].
    #[arg(long, value_enum)]
    pub tool_call_parser: Option<ToolCallParserArg>,
    /// How reasoning is split from the answer, as `ferrite serve --reasoning-parser`
    /// [default: detected from the chat template].
    #[arg(long, value_enum)]
    pub reasoning_parser: Option<ReasoningParserArg>,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ToolCallParserArg {
    Hermes,
    #[value(name = "llama3_json")]
    Llama3Json,
    Mistral,
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReasoningParserArg {
    Qwen3,
    #[value(name = "deepseek_r1")]
    DeepseekR1,
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MetricsNamesArg {
    Ferrite,
    Vllm,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// A GGUF file, a Hugging Face model directory, or a hub id.
    pub model: String,
    /// The prompt text.
    #[arg(long)]
    pub prompt: String,
    /// Wrap the prompt as a user message in the model's chat template.
    #[arg(long)]
    pub chat: bool,
    /// New tokens at most.
    #[arg(long, default_value_t = 128)]
    pub max_tokens: usize,
    /// Sampling temperature; 0 is greedy [default: the model's generation_config.json (with
    /// its top_p, top_k, min_p, repetition_penalty) when it samples, else 0].
    #[arg(long)]
    pub temperature: Option<f32>,
    /// Seed for sampling.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print the generated token ids (one line, space-separated) instead of the text: for
    /// comparing runs exactly, e.g. with and without speculative decoding.
    #[arg(long)]
    pub token_ids: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum EndpointArg {
    /// POST /v1/completions with a text prompt.
    Completions,
    /// POST /v1/chat/completions with messages.
    Chat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum WorkloadArg {
    /// Users sharing a system prompt, multi-turn conversations, short answers.
    Chatbot,
    /// Few sessions with long contexts growing by tool outputs, long answers.
    Agent,
    /// Unique prompts, short outputs, everything at once: throughput.
    Batch,
    /// Fixed-length prompts after an optional shared prefix (--input-len, --output-len,
    /// --prefix-len).
    Random,
    /// Requests from a JSONL file (--dataset).
    Replay,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The server's root URL; every request goes there and nowhere else.
    #[arg(long, default_value = "http://127.0.0.1:8000")]
    pub url: String,
    /// The model name to send [default: the first one the server's /v1/models lists].
    #[arg(long)]
    pub model: Option<String>,
    /// Sent as `Authorization: Bearer KEY`.
    #[arg(long, env = "FERRITE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// The API the requests use.
    #[arg(long, value_enum, default_value = "completions")]
    pub endpoint: EndpointArg,
    /// What to send (docs/benchmarks.md defines each workload and its default lengths).
    #[arg(long, value_enum, default_value = "random")]
    pub workload: WorkloadArg,
    /// JSONL requests for --workload replay: {"prompt": ..., "max_tokens": N} or
    /// {"messages": [...], "max_tokens": N}, with an optional "timestamp" in seconds.
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    /// New prompt tokens per request (N or MIN-MAX): the prompt, user message or tool output
    /// [default: per workload].
    #[arg(long)]
    pub input_len: Option<LenRange>,
    /// Tokens to generate per request (N or MIN-MAX) [default: per workload].
    #[arg(long)]
    pub output_len: Option<LenRange>,
    /// Tokens of text every request shares at its start (system prompt) [default: per workload].
    #[arg(long)]
    pub prefix_len: Option<usize>,
    /// Requests per conversation [default: chatbot 4, agent 6, others 1].
    #[arg(long)]
    pub turns: Option<usize>,
    /// Requests to send in all.
    #[arg(long, default_value_t = 100)]
    pub num_requests: usize,
    /// Mean request rate of Poisson arrivals, requests/s [default: all at once].
    #[arg(long)]
    pub request_rate: Option<f64>,
    /// Requests in flight at most [default: no limit].
    #[arg(long)]
    pub max_concurrency: Option<usize>,
    /// Seconds after which the run stops sending and cancels the requests still in flight.
    #[arg(long, default_value_t = 600.0)]
    pub max_duration: f64,
    /// Seed of the prompts, lengths and arrival times. The same seed sends the same prompts,
    /// which a server's prefix cache remembers from an earlier run: vary it between runs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The server model's tokenizer (a .gguf or tokenizer.json) to size prompts exactly in
    /// tokens [default: one token per word].
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// Let the model stop at end-of-sequence instead of asking for `ignore_eos`.
    #[arg(long)]
    pub no_ignore_eos: bool,
    /// Sampling temperature sent with every request.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// Service-level objectives for goodput, in ms unless suffixed: ttft=500,itl=100,tpot=50,e2e=10s
    /// (itl bounds a request's largest gap between tokens).
    #[arg(long)]
    pub slo: Option<Slo>,
    /// Print the result as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON result to this file.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Include every request's timings in the JSON result.
    #[arg(long)]
    pub per_request: bool,
    /// Do not draw the progress line on stderr.
    #[arg(long)]
    pub no_progress: bool,
}

#[derive(Debug, Args)]
pub struct BenchModelArgs {
    /// A GGUF file, a Hugging Face model directory, or a hub id [default:
    /// SmolLM2-135M-Instruct, fetched on first use].
    pub model: Option<String>,
    /// Prompt tokens of the prefill test (ppN), random ids; 0 skips it.
    #[arg(long, default_value_t = 512)]
    pub prompt_len: usize,
    /// Tokens the batch-1 decode test (tgN) generates; 0 skips it.
    #[arg(long, default_value_t = 128)]
    pub gen_len: usize,
    /// Measured runs of each test (after one unmeasured warm-up run).
    #[arg(long, default_value_t = 5)]
    pub repetitions: usize,
    /// Above 1, also run the throughput test: this many requests of --prompt-len prompt
    /// tokens and --gen-len output tokens submitted at once (aggregate output tokens/s).
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Seed of the random prompt token ids.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Skip the warm-up runs.
    #[arg(long)]
    pub no_warmup: bool,
    /// Print the results as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
}
