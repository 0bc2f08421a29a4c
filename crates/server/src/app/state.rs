//! What every handler shares.

use crate::text::fim::FimTokens;
use crate::text::token_text::TokenTexts;
use ferrite_engine::token_pieces::{InfillSampling, TokenPieces};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ferrite_engine::{EngineHandle, RequestId};

use crate::app::config::{CorsConfig, ServerConfig};
use crate::app::response_store::ResponseStore;
use crate::error::ApiError;
use crate::observe::metrics::Metrics;
use crate::observe::request_log::RequestLogConfig;
use crate::observe::request_names::{self, RequestNames};
use crate::openai::sampling::SamplingDefaults;
use crate::output::reasoning::ReasoningFormat;
use crate::output::structured::Grammars;
use crate::output::tool_calls::{is_harmony_template, ToolCallFormat};
use crate::text::chat_template::{template_reads_effort, template_reads_verbosity};
use crate::text::detokenizer::Registry;
use crate::text::tokenizer_pool::{TextModel, TokenizerPool};

pub struct AppState {
    pub engine: EngineHandle,
    pub tokenizers: TokenizerPool,
    pub registry: Registry,
    pub metrics: Arc<Metrics>,
    pub model_name: String,
    pub api_key: Option<String>,
    /// Requests accepted but not yet running, at most; more are refused with 503.
    pub max_waiting: usize,
    /// Token ids at or above this are refused.
    pub vocab_size: usize,
    /// The model's EOS token: a request that stops on it stopped on EOS, even when it also
    /// lists it in `stop_token_ids`.
    pub eos_token_id: Option<u32>,
    /// What requests get for the sampling fields they leave out.
    pub sampling_defaults: SamplingDefaults,
    /// Unix time the server started (the model's `created`).
    pub started: u64,
    /// How this model writes tool calls; `None`: requests with tools are refused.
    pub tool_format: Option<ToolCallFormat>,
    /// How this model marks its reasoning; `None`: all text is content.
    pub reasoning_format: Option<ReasoningFormat>,
    /// The chat template renders gpt-oss's harmony format (its messages get
    /// `text::harmony_inputs`); false where `text::harmony_render` renders the prompts.
    pub harmony_template: bool,
    /// The prompt takes a `reasoning_effort`: the harmony renderer, or a chat template with
    /// that variable (gpt-oss's).
    pub template_reads_effort: bool,
    /// The chat template has a `verbosity` variable (`generation::verbosity`).
    pub template_reads_verbosity: bool,
    /// Structured outputs' grammar compiler and cache.
    pub grammars: Grammars,
    /// CORS (`--allowed-origins` ...); `None`: no CORS headers, preflights unanswered.
    pub cors: Option<CorsConfig>,
    /// Whether requests get log lines (`--disable-log-requests` turns them off).
    pub request_log: RequestLogConfig,
    /// Engine request -> the client's request id, for the detokenizer's log line.
    pub request_names: RequestNames,
    /// The model's fill-in-the-middle tokens (`suffix`); `None`: it has none.
    pub fim: Option<FimTokens>,
    /// Every token's text for llama.cpp's `infill` sampler (`/infill`), with FIM tokens only.
    pub infill_sampling: Option<InfillSampling>,
    /// Chat requests may carry their own template (`--trust-request-chat-template`).
    pub trust_request_chat_template: bool,
    /// Stored responses (`/v1/responses`).
    pub responses: ResponseStore,
    /// The token that ends a think block (`</think>`), where the reasoning format has one:
    /// what a thinking budget forces.
    pub thinking_end: Option<u32>,
    next_id: AtomicU64,
}

impl AppState {
    pub fn new(
        engine: EngineHandle,
        tokenizers: TokenizerPool,
        registry: Registry,
        metrics: Arc<Metrics>,
        config: &ServerConfig,
        model: &TextModel,
        grammars: Grammars,
    ) -> Self {
        let template = model.chat_template.as_deref().unwrap_or_default();
        // Prompts rendered natively in harmony get gpt-oss's parsers whatever the template.
        let native_harmony = model.harmony_system().is_some();
        let tool_format = config.tool_call_parser.resolve(|| match native_harmony {
            true => Some(ToolCallFormat::Openai),
            false => ToolCallFormat::detect(template),
        });
        let reasoning_format = config.reasoning_parser.resolve(|| match native_harmony {
            true => Some(ReasoningFormat::OpenaiGptoss),
            false => ReasoningFormat::detect(template),
        });
        // A model with FIM tokens gets /infill and llama.cpp's infill sampler.
        let fim = FimTokens::of(&model.tokenizer);
        Self {
            engine,
            tokenizers,
            registry,
            metrics,
            model_name: config.served_model_name.clone(),
            api_key: config.api_key.clone(),
            max_waiting: config.max_waiting,
            vocab_size: config.vocab_size,
            eos_token_id: model
                .eos_token
                .as_deref()
                .and_then(|t| model.tokenizer.token_to_id(t)),
            sampling_defaults: config.sampling_defaults,
            started: crate::openai::response::unix_now(),
            tool_format,
            reasoning_format,
            harmony_template: !native_harmony && is_harmony_template(template),
            template_reads_effort: native_harmony || template_reads_effort(template),
            template_reads_verbosity: !native_harmony && template_reads_verbosity(template),
            grammars,
            cors: config.cors.clone(),
            request_log: config.request_log,
            request_names: RequestNames::default(),
            fim,
            infill_sampling: fim.map(|_| {
                let pieces = TokenTexts::new(&model.tokenizer)
                    .all_pieces(&model.tokenizer, config.vocab_size);
                InfillSampling(Arc::new(TokenPieces::new(pieces)))
            }),
            trust_request_chat_template: config.trust_request_chat_template,
            responses: ResponseStore::new(config.responses_store),
            thinking_end: reasoning_format
                .and_then(|f| f.end_token())
                .and_then(|t| model.tokenizer.token_to_id(t)),
            next_id: AtomicU64::new(1),
        }
    }

    /// A new engine request id, named after the HTTP request this task serves (its log line
    /// and span then carry the client's id).
    pub fn next_request_id(&self) -> RequestId {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.request_names.record(id);
        id
    }

    /// The HTTP request's id (`X-Request-Id` or the server's), which completion ids end with;
    /// a fresh number outside the middleware (unit tests).
    pub fn client_request_id(&self) -> String {
        match request_names::current() {
            Some(id) => id.to_string(),
            None => self.next_id.fetch_add(1, Ordering::Relaxed).to_string(),
        }
    }

    /// OpenAI clients always send `model`; anything but our name is a 404 (absent is fine).
    pub fn check_model(&self, requested: Option<&str>) -> Result<(), ApiError> {
        match requested {
            Some(m) if m != self.model_name => Err(ApiError::model_not_found(m)),
            _ => Ok(()),
        }
    }
}
