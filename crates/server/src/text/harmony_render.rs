//! gpt-oss's prompts in the harmony format, rendered natively as openai-harmony's
//! `render_conversation_for_completion` renders them (openai-harmony 0.0.8, with its default
//! `auto_drop_analysis`), which is how vLLM prompts gpt-oss. The chat template gpt-oss ships
//! writes some things otherwise (a blank line after instructions, `()` for a function without
//! parameters, tool results through `tojson`), so its prompts are not the ones gpt-oss was
//! trained on; `tests/fixtures/harmony` holds openai-harmony's token ids for 20 conversations.
//!
//! The OpenAI chat messages map to harmony messages as vLLM maps them, the instructions placed
//! as gpt-oss's template places them: the system message is harmony's (model identity,
//! knowledge cutoff, date, `Reasoning:`, channels); the request's first system or developer
//! message becomes the developer message's `# Instructions`, the tools its `functions`
//! namespace; an assistant turn's reasoning (`reasoning_content`, `reasoning` or `thinking`) an
//! `analysis` message, its tool calls `commentary` messages to `functions.NAME` (`json`), text
//! beside calls a `commentary` preamble, other text a `final` message; a tool result a message
//! from `functions.NAME` to the assistant.
//!
//! The prompt is a list of [`Piece`]s: each text piece is tokenized on its own, with special
//! tokens' text kept as text, exactly as openai-harmony tokenizes (so a user who writes
//! `<|end|>` cannot end a message).

mod typescript;

use serde_json::Value;
use thiserror::Error;

use crate::text::chat_template::{ChatInputs, EFFORT_VARIABLE};
use crate::text::strftime::strftime_now;

/// How chat prompts are rendered (`--chat-renderer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChatRenderer {
    /// Harmony where the chat template writes harmony (gpt-oss's), the template elsewhere.
    #[default]
    Auto,
    /// The model's Jinja chat template, always.
    Template,
    /// The native harmony renderer, always.
    Harmony,
}

impl ChatRenderer {
    pub fn renders_harmony(self, template: Option<&str>) -> bool {
        match self {
            Self::Auto => template.is_some_and(writes_harmony),
            Self::Template => false,
            Self::Harmony => true,
        }
    }
}

/// Whether a chat template writes the harmony format (its messages carry channels): the same
/// test as the output parsers' detection (`output::tool_calls::is_harmony_template`).
pub fn writes_harmony(template: &str) -> bool {
    template.contains("<|channel|>")
}

/// What the system message says besides the request's effort.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HarmonySystem {
    /// `Current date:` (YYYY-MM-DD); `None`: the day of the request, in UTC, as vLLM writes it.
    pub date: Option<String>,
}

const MODEL_IDENTITY: &str = "You are ChatGPT, a large language model trained by OpenAI.";
/// openai-harmony's default, which vLLM keeps.
const KNOWLEDGE_CUTOFF: &str = "2024-06";
const EFFORTS: [&str; 3] = ["low", "medium", "high"];

/// One piece of a prompt: a special token, or text tokenized on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Special(&'static str),
    Text(String),
}

/// The prompt's text: the pieces joined.
pub fn prompt_text(pieces: &[Piece]) -> String {
    pieces
        .iter()
        .map(|p| match p {
            Piece::Special(s) => *s,
            Piece::Text(t) => t.as_str(),
        })
        .collect()
}

#[derive(Debug, Error)]
pub enum HarmonyRenderError {
    #[error("{0}")]
    Messages(String),
    #[error("{0}")]
    Kwargs(String),
}

impl HarmonyRenderError {
    /// The request field at fault, for the 400.
    pub fn param(&self) -> &'static str {
        match self {
            Self::Messages(_) => "messages",
            Self::Kwargs(_) => "chat_template_kwargs",
        }
    }
}

/// A harmony message: its header's parts and its text.
struct Message {
    /// A role, or a tool's name (`functions.NAME`).
    author: String,
    recipient: Option<String>,
    channel: Option<&'static str>,
    content_type: Option<&'static str>,
    content: String,
    /// An assistant message with a recipient ends in `<|call|>`.
    assistant: bool,
}

impl Message {
    fn new(author: &str, content: String) -> Self {
        Self {
            author: author.to_string(),
            recipient: None,
            channel: None,
            content_type: None,
            content,
            assistant: author == "assistant",
        }
    }

    fn on(mut self, channel: &'static str) -> Self {
        self.channel = Some(channel);
        self
    }

    fn to(mut self, recipient: String) -> Self {
        self.recipient = Some(recipient);
        self
    }

    /// openai-harmony's `Render<Message>`: each header part its own text piece.
    fn render(&self, into: &mut Vec<Piece>) {
        into.push(Piece::Special("<|start|>"));
        into.push(Piece::Text(self.author.clone()));
        if let Some(recipient) = &self.recipient {
            into.push(Piece::Text(format!(" to={recipient}")));
        }
        if let Some(channel) = self.channel {
            into.push(Piece::Special("<|channel|>"));
            into.push(Piece::Text(channel.to_string()));
        }
        if let Some(content_type) = self.content_type {
            into.push(Piece::Text(format!(" {content_type}")));
        }
        into.push(Piece::Special("<|message|>"));
        into.push(Piece::Text(self.content.clone()));
        let end = if self.assistant && self.recipient.is_some() {
            "<|call|>"
        } else {
            "<|end|>"
        };
        into.push(Piece::Special(end));
    }
}

/// Renders a chat request (the chat template's inputs) for gpt-oss to answer.
pub fn render(
    inputs: &ChatInputs,
    system: &HarmonySystem,
) -> Result<Vec<Piece>, HarmonyRenderError> {
    let effort = effort(inputs)?;
    let mut messages = inputs.messages.as_slice();
    let mut instructions = None;
    if let Some(first) = messages.first().filter(|m| is_instruction(m)) {
        instructions = Some(text(first, "content")?).filter(|t| !t.is_empty());
        messages = &messages[1..];
    }
    let tools = tools_section(inputs.tools.as_deref())?;
    let mut harmony = vec![system_message(system, effort, tools.is_some())];
    if instructions.is_some() || tools.is_some() {
        harmony.push(Message::new("developer", developer(instructions, tools)));
    }
    let mut called = Vec::new();
    for message in messages {
        conversation_message(message, &mut called, &mut harmony)?;
    }
    let mut pieces = Vec::new();
    for (i, message) in harmony.iter().enumerate() {
        if !dropped(&harmony, i) {
            message.render(&mut pieces);
        }
    }
    if inputs.add_generation_prompt {
        pieces.push(Piece::Special("<|start|>"));
        pieces.push(Piece::Text("assistant".into()));
    }
    Ok(pieces)
}

/// The effort from the template variables (`reasoning_effort` was put there by
/// `generation::reasoning_effort`); other variables have no meaning here and are refused,
/// except `enable_thinking`, which the Anthropic API sets and gpt-oss has no use for (it
/// always reasons).
fn effort(inputs: &ChatInputs) -> Result<&str, HarmonyRenderError> {
    for key in inputs.extra_vars.keys() {
        if key != EFFORT_VARIABLE && key != "enable_thinking" {
            return Err(HarmonyRenderError::Kwargs(format!(
                "`chat_template_kwargs.{key}` is not supported with the harmony renderer \
                 (only `{EFFORT_VARIABLE}`)"
            )));
        }
    }
    match inputs.extra_vars.get(EFFORT_VARIABLE) {
        None => Ok("medium"),
        Some(Value::String(e)) if EFFORTS.contains(&e.as_str()) => Ok(e),
        Some(other) => Err(HarmonyRenderError::Kwargs(format!(
            "`{EFFORT_VARIABLE}` must be one of low, medium, high; got {other}"
        ))),
    }
}

fn system_message(system: &HarmonySystem, effort: &str, function_tools: bool) -> Message {
    let date = system
        .date
        .clone()
        .unwrap_or_else(|| strftime_now("%Y-%m-%d"));
    let mut text = format!(
        "{MODEL_IDENTITY}\nKnowledge cutoff: {KNOWLEDGE_CUTOFF}\nCurrent date: {date}\n\n\
         Reasoning: {effort}\n\n# Valid channels: analysis, commentary, final. Channel must be \
         included for every message."
    );
    if function_tools {
        text.push_str("\nCalls to these tools must go to the commentary channel: 'functions'.");
    }
    Message::new("system", text)
}

fn developer(instructions: Option<String>, tools: Option<String>) -> String {
    let mut sections = Vec::new();
    if let Some(instructions) = instructions {
        sections.push("# Instructions".to_string());
        sections.push(instructions);
    }
    sections.extend(tools);
    sections.join("\n\n")
}

/// The `# Tools` section with the `functions` namespace, or `None` without tools.
fn tools_section(tools: Option<&[Value]>) -> Result<Option<String>, HarmonyRenderError> {
    let Some(tools) = tools.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let mut lines = vec![
        "## functions\n".to_string(),
        "namespace functions {\n".into(),
    ];
    for tool in tools {
        let function = &tool["function"];
        let name = function["name"]
            .as_str()
            .ok_or_else(|| HarmonyRenderError::Messages("a tool has no function name".into()))?;
        let description = function["description"].as_str().unwrap_or_default();
        lines.extend(description.lines().map(|l| format!("// {l}")));
        lines.push(match function.get("parameters").filter(|p| !p.is_null()) {
            Some(p) => format!(
                "type {name} = (_: {}) => any;\n",
                typescript::schema_type(p, "")
            ),
            None => format!("type {name} = () => any;\n"),
        });
    }
    lines.push("} // namespace functions".into());
    Ok(Some(format!("# Tools\n\n{}", lines.join("\n"))))
}

fn is_instruction(message: &Value) -> bool {
    matches!(message["role"].as_str(), Some("system" | "developer"))
}

/// A message's text field: a string, or nothing for `null` or absent.
fn text(message: &Value, field: &str) -> Result<String, HarmonyRenderError> {
    match &message[field] {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        _ => Err(HarmonyRenderError::Messages(format!(
            "a message's `{field}` must be a string"
        ))),
    }
}

/// Appends what one chat message means; `called` is the tool calls so far (id, name), for the
/// results' authors.
fn conversation_message(
    message: &Value,
    called: &mut Vec<(String, String)>,
    into: &mut Vec<Message>,
) -> Result<(), HarmonyRenderError> {
    let content = text(message, "content")?;
    match message["role"].as_str().unwrap_or_default() {
        "user" => into.push(Message::new("user", content)),
        // Instructions later in the conversation: a developer message of their own.
        "system" | "developer" => {
            into.push(Message::new("developer", developer(Some(content), None)))
        }
        "assistant" => {
            let reasoning = ["reasoning_content", "reasoning", "thinking"]
                .iter()
                .find_map(|k| message[*k].as_str().filter(|r| !r.is_empty()));
            if let Some(reasoning) = reasoning {
                into.push(Message::new("assistant", reasoning.to_string()).on("analysis"));
            }
            let calls = message["tool_calls"]
                .as_array()
                .map_or(&[][..], Vec::as_slice);
            if calls.is_empty() {
                if !content.is_empty() {
                    into.push(Message::new("assistant", content).on("final"));
                }
                return Ok(());
            }
            if !content.is_empty() {
                into.push(Message::new("assistant", content).on("commentary"));
            }
            for call in calls {
                let (name, arguments) = call_parts(call)?;
                if let Some(id) = call["id"].as_str() {
                    called.push((id.to_string(), name.clone()));
                }
                let mut m = Message::new("assistant", arguments)
                    .on("commentary")
                    .to(format!("functions.{name}"));
                m.content_type = Some("json");
                into.push(m);
            }
        }
        "tool" => {
            let by_id = message["tool_call_id"]
                .as_str()
                .and_then(|id| called.iter().rev().find(|(c, _)| c == id))
                .map(|(_, name)| name.clone());
            let name = by_id.or_else(|| message["name"].as_str().map(str::to_string));
            let name = name.ok_or_else(|| {
                HarmonyRenderError::Messages(
                    "a tool message's `tool_call_id` matches no earlier tool call (and it has \
                     no `name`)"
                        .into(),
                )
            })?;
            let author = format!("functions.{name}");
            into.push(
                Message::new(&author, content)
                    .on("commentary")
                    .to("assistant".into()),
            );
        }
        other => {
            return Err(HarmonyRenderError::Messages(format!(
                "the role `{other}` has no harmony rendering"
            )))
        }
    }
    Ok(())
}

/// A tool call's function name and its arguments' JSON text.
fn call_parts(call: &Value) -> Result<(String, String), HarmonyRenderError> {
    let function = &call["function"];
    let name = function["name"]
        .as_str()
        .ok_or_else(|| HarmonyRenderError::Messages("a tool call has no function name".into()))?;
    let arguments = match &function["arguments"] {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    Ok((name.to_string(), arguments))
}

/// openai-harmony's `auto_drop_analysis`: when the last assistant message is a final answer,
/// the analysis messages before the conversation's first final answer are left out (the
/// reasoning of finished turns; later turns' stays, as openai-harmony keeps it).
fn dropped(messages: &[Message], index: usize) -> bool {
    let last_assistant_final = messages
        .iter()
        .rev()
        .find(|m| m.author == "assistant")
        .is_some_and(|m| m.channel == Some("final"));
    let first_final = messages.iter().position(|m| m.channel == Some("final"));
    last_assistant_final
        && first_final.is_some_and(|f| index < f)
        && messages[index].channel == Some("analysis")
}

#[cfg(test)]
mod tests;
