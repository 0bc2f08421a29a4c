//! The flags of `ferrite bench` (load against a server) and `ferrite bench-model` (in-process).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use ferrite_bench::{LenRange, Slo};

use super::EngineArgs;

// `ferrite bench --help`'s headings, in this order.
const TARGET: &str = "Server";
const WORKLOAD: &str = "Workload";
const REPORT: &str = "Report";

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
    #[arg(long, default_value = "http://127.0.0.1:8000", help_heading = TARGET)]
    pub url: String,
    /// The model name to send [default: the first one the server's /v1/models lists].
    #[arg(long, help_heading = TARGET)]
    pub model: Option<String>,
    /// Sent as `Authorization: Bearer KEY`.
    #[arg(long, env = "FERRITE_API_KEY", hide_env_values = true, help_heading = TARGET)]
    pub api_key: Option<String>,
    /// The API the requests use.
    #[arg(long, value_enum, default_value = "completions", help_heading = TARGET)]
    pub endpoint: EndpointArg,
    /// What to send (docs/benchmarks.md defines each workload and its default lengths).
    #[arg(long, value_enum, default_value = "random", help_heading = WORKLOAD)]
    pub workload: WorkloadArg,
    /// JSONL requests for --workload replay: {"prompt": ..., "max_tokens": N} or
    /// {"messages": [...], "max_tokens": N}, with an optional "timestamp" in seconds.
    #[arg(long, help_heading = WORKLOAD)]
    pub dataset: Option<PathBuf>,
    /// New prompt tokens per request (N or MIN-MAX): the prompt, user message or tool output
    /// [default: per workload].
    #[arg(long, help_heading = WORKLOAD)]
    pub input_len: Option<LenRange>,
    /// Tokens to generate per request (N or MIN-MAX) [default: per workload].
    #[arg(long, help_heading = WORKLOAD)]
    pub output_len: Option<LenRange>,
    /// Tokens of text every request shares at its start (system prompt) [default: per workload].
    #[arg(long, help_heading = WORKLOAD)]
    pub prefix_len: Option<usize>,
    /// Requests per conversation [default: chatbot 4, agent 6, others 1].
    #[arg(long, help_heading = WORKLOAD)]
    pub turns: Option<usize>,
    /// Requests to send in all.
    #[arg(long, default_value_t = 100, help_heading = WORKLOAD)]
    pub num_requests: usize,
    /// Mean request rate of Poisson arrivals, requests/s [default: all at once].
    #[arg(long, help_heading = WORKLOAD)]
    pub request_rate: Option<f64>,
    /// Requests in flight at most [default: no limit].
    #[arg(long, help_heading = WORKLOAD)]
    pub max_concurrency: Option<usize>,
    /// Seconds after which the run stops sending and cancels the requests still in flight.
    #[arg(long, default_value_t = 600.0, help_heading = WORKLOAD)]
    pub max_duration: f64,
    /// Seed of the prompts, lengths and arrival times. The same seed sends the same prompts,
    /// which a server's prefix cache remembers from an earlier run: vary it between runs.
    #[arg(long, default_value_t = 0, help_heading = WORKLOAD)]
    pub seed: u64,
    /// The server model's tokenizer (a .gguf or tokenizer.json) to size prompts exactly in
    /// tokens [default: one token per word].
    #[arg(long, help_heading = WORKLOAD)]
    pub tokenizer: Option<PathBuf>,
    /// Let the model stop at end-of-sequence instead of asking for `ignore_eos`.
    #[arg(long, help_heading = WORKLOAD)]
    pub no_ignore_eos: bool,
    /// Sampling temperature sent with every request.
    #[arg(long, default_value_t = 0.0, help_heading = WORKLOAD)]
    pub temperature: f32,
    /// Service-level objectives for goodput, in ms unless suffixed: ttft=500,itl=100,tpot=50,e2e=10s
    /// (itl bounds a request's largest gap between tokens).
    #[arg(long, help_heading = REPORT)]
    pub slo: Option<Slo>,
    /// Print the result as JSON instead of the table.
    #[arg(long, help_heading = REPORT)]
    pub json: bool,
    /// Also write the JSON result to this file.
    #[arg(long, help_heading = REPORT)]
    pub output: Option<PathBuf>,
    /// Include every request's timings in the JSON result.
    #[arg(long, help_heading = REPORT)]
    pub per_request: bool,
    /// Do not draw the progress line on stderr.
    #[arg(long, help_heading = REPORT)]
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
