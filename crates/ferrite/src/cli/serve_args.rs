//! The flags of `ferrite serve`, and those `ferrite run-batch` shares with it.

use clap::{Args, ValueEnum};

use super::{heading, EngineArgs, VllmArgs};
use crate::byte_size::parse_byte_size;

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub served: ServedModelArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1", help_heading = heading::API)]
    pub host: String,
    /// Port to listen on.
    #[arg(long, default_value_t = 8000, help_heading = heading::API)]
    pub port: u16,
    /// Require `Authorization: Bearer KEY` on the API routes (/health and /metrics stay open).
    #[arg(long, env = "FERRITE_API_KEY", help_heading = heading::API)]
    pub api_key: Option<String>,
    /// Requests allowed to wait for a slot; more are answered 503.
    #[arg(long, default_value_t = 1024, help_heading = heading::API)]
    pub max_waiting: usize,
    /// Responses (/v1/responses) kept in memory for `previous_response_id`,
    /// `GET /v1/responses/{id}` and `background`: at most this many, the oldest dropped first;
    /// 0 keeps none (requests with `store: true` are then answered without being kept, and
    /// `previous_response_id` and `background` are refused).
    #[arg(long, value_name = "N", default_value_t = 4096, help_heading = heading::API)]
    pub responses_store_capacity: usize,
    /// Memory the stored responses may take, with their conversations (an agent's every turn
    /// holds the whole conversation so far); past it the oldest are dropped. Sizes like 256MiB.
    #[arg(long, value_name = "BYTES", default_value = "256MiB", value_parser = parse_byte_size,
          help_heading = heading::API)]
    pub responses_store_memory: usize,
    /// Seconds a stored response is kept.
    #[arg(long, value_name = "SECONDS", default_value_t = 3600, help_heading = heading::API)]
    pub responses_store_ttl: u64,
    #[command(flatten)]
    pub chat: ChatFormatArgs,
    /// Names of the vLLM-defined series on /metrics: `ferrite` (ferrite:num_requests_waiting,
    /// ...) or `vllm` (vllm:num_requests_waiting, ...: what vLLM's dashboards and the Gateway
    /// API Inference Extension read). ferrite's own series keep their ferrite: name.
    #[arg(long, value_enum, default_value_t = MetricsNamesArg::Ferrite,
          help_heading = heading::OPERATIONS)]
    pub metrics_names: MetricsNamesArg,
    /// Export ferrite:moe_expert_tokens_total{layer,expert} on /metrics: the tokens a
    /// mixture-of-experts model routed to each expert since load, to see whether the experts
    /// are balanced (layers x experts series; CPU backend; nothing for a dense model).
    #[arg(long, help_heading = heading::OPERATIONS)]
    pub expert_load_metrics: bool,
    /// Log format on stderr: `text` for people, `json` for log pipelines (one object a line).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, help_heading = heading::OPERATIONS)]
    pub log_format: LogFormat,
    /// Add the prompt and output token ids to each finished request's log line.
    #[arg(long, help_heading = heading::OPERATIONS)]
    pub log_token_ids: bool,
    /// Add the prompt text (chat template applied) to each finished request's log line; off
    /// by default because prompts are user data.
    #[arg(long, help_heading = heading::OPERATIONS)]
    pub log_prompts: bool,
    #[command(flatten)]
    pub operations: OperationsArgs,
    /// vLLM's flags, each under the heading of its topic.
    #[command(flatten)]
    pub vllm: VllmArgs,
}

/// Running as one replica among many (Kubernetes, llm-d): drain, scale-out signal.
#[derive(Debug, Args)]
#[command(next_help_heading = heading::OPERATIONS)]
pub struct OperationsArgs {
    /// Seconds a drain (after SIGTERM or Ctrl-C) may take: new requests get 503 with
    /// Retry-After while running ones finish; those still running then are aborted
    /// (finish_reason "abort"); a second Ctrl-C aborts them at once. Keep it below
    /// Kubernetes' terminationGracePeriodSeconds.
    #[arg(long, default_value_t = 30.0, value_name = "SECONDS")]
    pub shutdown_timeout: f64,
    /// Seconds the waiting queue must stay non-empty without shrinking before
    /// ferrite:scale_out_needed{reason="waiting_queue_growth"} turns 1; also the window over
    /// which preemptions are averaged. 0 turns the scale-out signal off.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub scale_out_window: u64,
    /// Preemptions per second (averaged over --scale-out-window) above which
    /// ferrite:scale_out_needed{reason="preemptions"} turns 1: the KV cache thrashes.
    #[arg(long, default_value_t = 0.5, value_name = "PER_SECOND")]
    pub scale_out_preemption_rate: f64,
    /// Also answer /ready with 503 while the scale-out signal is on, so that the load
    /// balancer prefers other replicas (off: when every replica is saturated, all of them
    /// would leave the pool).
    #[arg(long)]
    pub unready_on_scale_out: bool,
    /// Publish KV-cache events as vLLM does, for KV-aware routers (llm-d, Dynamo): vLLM's
    /// JSON, e.g. '{"enable_kv_cache_events": true, "publisher": "zmq", "endpoint":
    /// "tcp://*:5557", "topic": "kv@POD@MODEL", "replay_endpoint": "tcp://*:5558"}'.
    #[arg(long, value_name = "JSON")]
    pub kv_events_config: Option<String>,
    /// Export a span per request (name llm_request, vLLM's gen_ai.* attributes, parent from
    /// the W3C traceparent header) over OTLP/HTTP with JSON encoding: http://HOST:4318, or the
    /// full .../v1/traces URL.
    #[arg(long, value_name = "URL")]
    pub otlp_traces_endpoint: Option<String>,
}

/// The model a server answers with: `ferrite serve`'s (run-batch has its own, whose `--model`
/// also overrides the requests' `model`).
#[derive(Debug, Args)]
pub struct ServedModelArgs {
    /// A GGUF file, a Hugging Face model directory, or a hub id [default: SmolLM2-135M-Instruct,
    /// fetched on first use]. With --load-format dummy: a preset name or a config.json.
    pub model: Option<String>,
    /// The model, as a flag (instead of the positional MODEL).
    #[arg(long = "model", id = "model_flag", value_name = "MODEL", conflicts_with = "model",
          help_heading = heading::MODEL)]
    pub model_flag: Option<String>,
    /// The model name clients use in requests; another is answered 404 [default: the model
    /// file's name].
    #[arg(long, help_heading = heading::MODEL)]
    pub served_model_name: Option<String>,
}

/// How chat prompts are rendered and the model's answers read: shared by `ferrite serve` and
/// `ferrite run-batch`, which build the same router.
#[derive(Debug, Args)]
#[command(next_help_heading = heading::API)]
pub struct ChatFormatArgs {
    /// Threads that render chat templates and tokenize prompts.
    #[arg(long, default_value_t = 2, help_heading = heading::ENGINE)]
    pub tokenizer_workers: usize,
    /// How tool calls are read from the model's output when a chat request has `tools`
    /// (vLLM's names): `hermes` (Qwen2.5, Qwen3, Hermes: <tool_call>{...}</tool_call>),
    /// `llama3_json` (Llama 3.x JSON calls), `mistral` ([TOOL_CALLS][...]), `qwen3_coder`
    /// (Qwen3.5 / 3.6, Qwen3-Coder: <tool_call><function=NAME><parameter=P>...), `openai`
    /// (gpt-oss's harmony format: commentary messages to functions.NAME), `none` (tools are
    /// refused). [default: detected from the chat template]
    #[arg(long, value_enum)]
    pub tool_call_parser: Option<ToolCallParserArg>,
    /// How reasoning is split from the answer into `reasoning_content` (vLLM's names): `qwen3`
    /// (<think>...</think> when the model opens it), `deepseek_r1` (the answer starts inside
    /// the reasoning, </think> ends it), `openai_gptoss` (gpt-oss's harmony format: the
    /// analysis channel), `none` (all text is content). [default: detected from the chat
    /// template]
    #[arg(long, value_enum)]
    pub reasoning_parser: Option<ReasoningParserArg>,
    /// How chat prompts are rendered: `auto` (gpt-oss's harmony format natively, token for
    /// token as openai-harmony renders it, where the chat template writes harmony; the chat
    /// template elsewhere), `template` (the model's Jinja chat template, always), `harmony`
    /// (the native harmony renderer, always).
    #[arg(long, value_enum, default_value_t = ChatRendererArg::Auto)]
    pub chat_renderer: ChatRendererArg,
    /// The `Current date:` of harmony prompts, YYYY-MM-DD [default: the day of each request,
    /// UTC]. A fixed date keeps prompts (and prefix-cache hits) the same across days.
    #[arg(long, value_parser = parse_date)]
    pub harmony_date: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ChatRendererArg {
    Auto,
    Template,
    Harmony,
}

/// A YYYY-MM-DD date.
fn parse_date(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && digits(0..4)
        && digits(5..7)
        && digits(8..10)
    {
        Ok(s.to_string())
    } else {
        Err(format!("{s:?} is not a YYYY-MM-DD date"))
    }
}

impl ServedModelArgs {
    /// The model, given as MODEL or as --model.
    pub fn spec(&self) -> Option<&str> {
        self.model.as_deref().or(self.model_flag.as_deref())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ToolCallParserArg {
    Hermes,
    #[value(name = "llama3_json")]
    Llama3Json,
    Mistral,
    /// Qwen3.5 / Qwen3.6 and Qwen3-Coder: `<tool_call><function=NAME><parameter=P>...`.
    #[value(name = "qwen3_coder")]
    Qwen3Coder,
    /// gpt-oss (harmony): `<|channel|>commentary to=functions.NAME ...<|message|>{...}<|call|>`.
    Openai,
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReasoningParserArg {
    Qwen3,
    #[value(name = "deepseek_r1")]
    DeepseekR1,
    /// gpt-oss (harmony): the analysis channel is the reasoning.
    #[value(name = "openai_gptoss")]
    OpenaiGptoss,
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
