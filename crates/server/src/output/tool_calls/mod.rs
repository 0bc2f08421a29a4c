//! Tool calls in a model's output, in the format its family was trained on: Hermes / Qwen
//! `<tool_call>{...}</tool_call>` ([`hermes`]), Qwen3-Coder / Qwen3.5 `<tool_call><function=...>`
//! ([`qwen3_xml`]), Llama 3.x JSON ([`llama3_json`]), Mistral `[TOOL_CALLS][...]` ([`mistral`]). One incremental parser ([`stream::ToolCallParser`])
//! serves both the streamed and the complete answer, so the two agree by construction.
//! gpt-oss's harmony calls (`openai`) are messages of their own, read with the rest of a harmony
//! answer by `output::harmony`.

mod call_object;
mod forced;
mod forced_xml;
pub mod hermes;
pub mod llama3_json;
pub mod mistral;
pub mod qwen3_xml;
pub mod stream;

pub use forced::forced_call_grammar;
pub use stream::{parse_complete, ToolCallParser, ToolEvent};

use std::sync::Arc;

use serde_json::Value;

/// How one request's answers are read for calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolParsing {
    pub format: ToolCallFormat,
    /// `parallel_tool_calls`: false keeps the first call only.
    pub parallel: bool,
    /// The offered tools' names: a bare call object (no markers) counts only if it names one.
    pub tool_names: Arc<[String]>,
    /// The offered tools' names and parameters schemas (those that have one): formats whose
    /// arguments are not JSON text (`qwen3_coder`) read the parameters' types from them.
    pub tool_schemas: Arc<[(String, Value)]>,
    /// A grammar forces the answer to be calls (`tool_choice` "required" or named): a block
    /// cut short (by `max_tokens`) is dropped rather than shown as content.
    pub forced: bool,
}

impl ToolParsing {
    pub fn new(format: ToolCallFormat, parallel: bool) -> Self {
        Self {
            format,
            parallel,
            tool_names: Arc::from(Vec::new()),
            tool_schemas: Arc::from(Vec::new()),
            forced: false,
        }
    }
}

/// How a model writes tool calls (`--tool-call-parser`, named as vLLM names them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolCallFormat {
    Hermes,
    Llama3Json,
    Mistral,
    /// Qwen3-Coder, Qwen3.5, Qwen3.6: `<tool_call><function=...><parameter=...>`.
    Qwen3Coder,
    /// gpt-oss (harmony): `<|channel|>commentary to=functions.NAME ...<|message|>{...}<|call|>`.
    Openai,
}

/// A call as the model wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedToolCall {
    pub name: String,
    /// A JSON object's text, as the model wrote it (`{}` when it gave none).
    pub arguments: String,
}

/// Where a format's call blocks begin and end in the text.
pub struct Markers {
    /// What opens a block, and whether that text belongs to the block's body (Llama's `{`).
    pub starts: &'static [(&'static str, bool)],
    /// Blocks open only at the very start of the answer (after whitespace), not mid-text.
    pub only_at_start: bool,
    /// What closes a block; `None`: the block runs to the end of the output.
    pub end: Option<&'static str>,
    /// An answer that is one bare call object, without the markers, is a call too if it names
    /// an offered tool (Qwen2.5-Coder writes its calls so, never with `<tool_call>`).
    pub bare_call_answer: bool,
}

impl ToolCallFormat {
    /// The format a chat template renders tool calls in, if it renders any.
    pub fn detect(template: &str) -> Option<Self> {
        // Qwen3-Coder's and Qwen3.5's templates have `<tool_call>` too: the XML form first.
        if is_harmony_template(template) {
            Some(Self::Openai)
        } else if template.contains("<function=") || template.contains("<parameter=") {
            Some(Self::Qwen3Coder)
        } else if template.contains("<tool_call>") {
            Some(Self::Hermes)
        } else if template.contains("[TOOL_CALLS]") {
            Some(Self::Mistral)
        } else if template.contains("<|python_tag|>") || template.contains("ipython") {
            Some(Self::Llama3Json)
        } else {
            None
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Hermes => "hermes",
            Self::Llama3Json => "llama3_json",
            Self::Mistral => "mistral",
            Self::Qwen3Coder => "qwen3_coder",
            Self::Openai => "openai",
        }
    }

    pub fn markers(self) -> &'static Markers {
        match self {
            Self::Hermes => &hermes::MARKERS,
            Self::Llama3Json => &llama3_json::MARKERS,
            Self::Mistral => &mistral::MARKERS,
            Self::Qwen3Coder => &qwen3_xml::MARKERS,
            Self::Openai => &NO_BLOCKS,
        }
    }

    /// The calls in one block's body; `None` when it is not a well-formed call (the block is
    /// then plain text).
    pub fn parse_body(self, body: &str, parsing: &ToolParsing) -> Option<Vec<ParsedToolCall>> {
        match self {
            Self::Hermes => hermes::parse_body(body),
            Self::Llama3Json => llama3_json::parse_body(body),
            Self::Mistral => mistral::parse_body(body),
            Self::Qwen3Coder => qwen3_xml::parse_body(body, &parsing.tool_schemas),
            Self::Openai => None,
        }
    }

    /// Mistral's `[TOOL_CALLS]` and harmony's markers are special tokens, which decoding would
    /// otherwise drop.
    pub fn needs_special_tokens(self) -> bool {
        matches!(self, Self::Mistral | Self::Openai)
    }
}

/// Harmony calls are not blocks within text ([`crate::output::harmony`] reads them): a parser
/// given these markers finds no block.
static NO_BLOCKS: Markers = Markers {
    starts: &[],
    only_at_start: false,
    end: None,
    bare_call_answer: false,
};

/// Whether a chat template renders gpt-oss's harmony format (its messages carry channels).
pub fn is_harmony_template(template: &str) -> bool {
    template.contains("<|channel|>")
}

#[cfg(test)]
mod tests;
