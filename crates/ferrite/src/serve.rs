//! `ferrite serve`.

use ferrite_model::hf::GenerationDefaults;
use ferrite_server::reasoning::ReasoningFormat;
use ferrite_server::tool_calls::ToolCallFormat;
use std::time::Duration;

use ferrite_server::kv_events::KvEventsConfig;
use ferrite_server::{
    ChatRenderer, HarmonySystem, Loaded, MetricNames, ParserChoice, RequestLogConfig,
    SamplingDefaults, ScaleOutConfig, ServeOptions, ServerConfig, StoreLimits, TextModel,
};

use crate::cli::{
    ChatFormatArgs, ChatRendererArg, MetricsNamesArg, ReasoningParserArg, ServeArgs,
    ToolCallParserArg,
};
use crate::engine_setup::start_engine;
use crate::model_source::{self, LoadedModel};

pub fn run(mut args: ServeArgs) -> anyhow::Result<()> {
    // vLLM's flags: refused ones before anything loads, the rest folded into ferrite's.
    args.vllm.check(args.engine.device)?;
    if args.vllm.no_enable_prefix_caching {
        args.engine.no_prefix_caching = true;
    }
    // Read now, so that a wrong path fails before the weights load; from here on it holds the
    // template's text.
    if let Some(spec) = args.vllm.chat_template.take() {
        args.vllm.chat_template = Some(chat_template_arg(&spec)?);
    }
    if args.vllm.trust_remote_code {
        tracing::info!("--trust-remote-code has no effect: ferrite runs no code from the model");
    }
    let ops = &args.operations;
    if !(ops.shutdown_timeout >= 0.0 && ops.shutdown_timeout.is_finite()) {
        anyhow::bail!("--shutdown-timeout must be a number of seconds >= 0");
    }
    let options = ServeOptions {
        host: args.host.clone(),
        port: args.port,
        shutdown_timeout: Duration::from_secs_f64(ops.shutdown_timeout),
        scale_out: ScaleOutConfig {
            window: Duration::from_secs(ops.scale_out_window),
            preemptions_per_second: ops.scale_out_preemption_rate,
        },
        unready_on_scale_out: ops.unready_on_scale_out,
        kv_events: match &ops.kv_events_config {
            Some(json) => KvEventsConfig::parse(json).map_err(anyhow::Error::msg)?,
            None => None,
        },
        otlp_traces_endpoint: ops.otlp_traces_endpoint.clone(),
        log_requests: !args.vllm.disable_log_requests,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(ferrite_server::serve(options, move || load(args)))
}

/// Everything that takes time before the first request can be answered: the weights, the
/// engine, the tokenizer (on the loader thread, while the listener answers 503).
fn load(args: ServeArgs) -> anyhow::Result<Loaded> {
    let spec = args.served.spec();
    let mut model = model_source::load_model(spec, &args.engine)?;
    let engine = start_engine(&mut model, &args.engine)?;
    let mut text = text_model(&model, &args.chat);
    if let Some(template) = args.vllm.chat_template.clone() {
        text.chat_template = Some(template);
        tracing::info!("chat template from --chat-template replaces the model's");
    }
    let mut sampling_defaults = sampling_defaults(&model.generation);
    sampling_defaults.seed = args.vllm.seed;
    let cors = args.vllm.cors()?;
    let config = ServerConfig {
        host: args.host,
        port: args.port,
        served_model_name: args.served.served_model_name.unwrap_or(model.name),
        api_key: args.api_key,
        max_waiting: args.max_waiting,
        tokenizer_workers: args.chat.tokenizer_workers,
        vocab_size: engine.vocab_size,
        expert_load_metrics: args.expert_load_metrics,
        metrics_names: match args.metrics_names {
            MetricsNamesArg::Ferrite => MetricNames::Ferrite,
            MetricsNamesArg::Vllm => MetricNames::Vllm,
        },
        sampling_defaults,
        request_log: RequestLogConfig {
            token_ids: args.log_token_ids,
            prompts: args.log_prompts,
            disabled: args.vllm.disable_log_requests,
        },
        tool_call_parser: tool_call_parser(args.chat.tool_call_parser),
        reasoning_parser: reasoning_parser(args.chat.reasoning_parser),
        tracer: None,
        cors,
        trust_request_chat_template: args.vllm.trust_request_chat_template,
        responses_store: StoreLimits {
            capacity: args.responses_store_capacity,
            max_bytes: args.responses_store_memory,
            ttl: Duration::from_secs(args.responses_store_ttl),
        },
    };
    Ok(Loaded {
        config,
        model: text,
        engine: engine.handle,
        outputs: engine.outputs,
    })
}

/// What the server needs of the model besides the engine: tokenizer, chat template and how
/// chat prompts are rendered.
pub fn text_model(model: &LoadedModel, chat: &ChatFormatArgs) -> TextModel {
    TextModel {
        tokenizer: model.tokenizer.tokenizer.clone(),
        chat_template: model.tokenizer.chat_template.clone(),
        bos_token: model.tokenizer.bos_token.clone(),
        eos_token: model.tokenizer.eos_token.clone(),
        chat_renderer: match chat.chat_renderer {
            ChatRendererArg::Auto => ChatRenderer::Auto,
            ChatRendererArg::Template => ChatRenderer::Template,
            ChatRendererArg::Harmony => ChatRenderer::Harmony,
        },
        harmony: HarmonySystem {
            date: chat.harmony_date.clone(),
        },
    }
}

/// `--chat-template`: a file's text, or the template itself, as vLLM reads it: a value with
/// Jinja delimiters is a template, anything else must be a readable file.
pub(crate) fn chat_template_arg(spec: &str) -> anyhow::Result<String> {
    let path = std::path::Path::new(spec);
    if path.is_file() {
        return std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("--chat-template: reading {spec}: {e}"));
    }
    if spec.contains("{{") || spec.contains("{%") {
        return Ok(spec.to_string());
    }
    anyhow::bail!("--chat-template {spec:?} is neither a file nor a Jinja template")
}

pub fn tool_call_parser(arg: Option<ToolCallParserArg>) -> ParserChoice<ToolCallFormat> {
    match arg {
        None => ParserChoice::Detect,
        Some(ToolCallParserArg::None) => ParserChoice::Off,
        Some(ToolCallParserArg::Hermes) => ParserChoice::Use(ToolCallFormat::Hermes),
        Some(ToolCallParserArg::Llama3Json) => ParserChoice::Use(ToolCallFormat::Llama3Json),
        Some(ToolCallParserArg::Mistral) => ParserChoice::Use(ToolCallFormat::Mistral),
        Some(ToolCallParserArg::Qwen3Coder) => ParserChoice::Use(ToolCallFormat::Qwen3Coder),
        Some(ToolCallParserArg::Openai) => ParserChoice::Use(ToolCallFormat::Openai),
    }
}

pub fn reasoning_parser(arg: Option<ReasoningParserArg>) -> ParserChoice<ReasoningFormat> {
    match arg {
        None => ParserChoice::Detect,
        Some(ReasoningParserArg::None) => ParserChoice::Off,
        Some(ReasoningParserArg::Qwen3) => ParserChoice::Use(ReasoningFormat::Qwen3),
        Some(ReasoningParserArg::DeepseekR1) => ParserChoice::Use(ReasoningFormat::DeepseekR1),
        Some(ReasoningParserArg::OpenaiGptoss) => ParserChoice::Use(ReasoningFormat::OpenaiGptoss),
    }
}

/// The model's generation_config.json values as request defaults, field by field, as vLLM's
/// default `--generation-config auto` applies them (whatever `do_sample` says); OpenAI's
/// defaults for the rest.
pub fn sampling_defaults(generation: &GenerationDefaults) -> SamplingDefaults {
    let openai = SamplingDefaults::default();
    let defaults = SamplingDefaults {
        temperature: generation.temperature.unwrap_or(openai.temperature),
        top_p: generation.top_p.unwrap_or(openai.top_p),
        top_k: generation.top_k.map_or(openai.top_k, |k| k as i64),
        min_p: generation.min_p.unwrap_or(openai.min_p),
        repetition_penalty: generation
            .repetition_penalty
            .unwrap_or(openai.repetition_penalty),
        seed: None,
    };
    if defaults != openai {
        tracing::info!(?defaults, "sampling defaults from generation_config.json");
    }
    defaults
}
