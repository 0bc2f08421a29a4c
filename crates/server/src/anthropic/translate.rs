//! An Anthropic conversation as the OpenAI-style chat messages chat templates are written for:
//! `system` becomes a system message, an assistant's `tool_use` blocks its `tool_calls`
//! (arguments: the input's JSON text), each `tool_result` block a `tool` message with its
//! `tool_call_id`. Text blocks of one message are joined with a newline; block types a text
//! model cannot read (images, documents, ...) are a 400 naming where they are.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::request::{
    AnthropicToolChoice, Conversation, InputContent, InputMessage, SystemPrompt, TextBlockParam,
    ThinkingBlockParam, ThinkingConfig, ToolDefinition, ToolResultBlockParam, ToolResultContent,
    ToolUseBlockParam,
};
use crate::error::ApiError;
use crate::generation::chat_turn::ChatTurn;
use crate::openai::chat::{ChatMessage, MessageContent};
use crate::openai::tools::{
    FunctionName, FunctionSpec, NamedToolChoice, ToolCall, ToolChoice, ToolChoiceMode, ToolKind,
    ToolSpec,
};

/// Anthropic's floor for `thinking.budget_tokens`.
const MIN_THINKING_BUDGET: i64 = 1024;

/// The turn `conversation` asks for. `max_tokens` is the request's (none for count_tokens);
/// `reads_reasoning`: whether the server splits reasoning off (`--reasoning-parser`), without
/// which `thinking` could not be answered with thinking blocks.
pub fn chat_turn(
    conversation: Conversation,
    max_tokens: Option<usize>,
    reads_reasoning: bool,
) -> Result<ChatTurn, ApiError> {
    let Conversation {
        messages,
        system,
        tools,
        tool_choice,
        thinking,
    } = conversation;
    let (tool_choice, parallel_tool_calls) = match tool_choice {
        Some(c) => {
            let (choice, parallel) = chat_tool_choice(c);
            (Some(choice), parallel)
        }
        None => (None, None),
    };
    // A final assistant turn prefills the answer: the model goes on from its last character.
    let prefill = messages.last().is_some_and(|m| m.role == "assistant");
    Ok(ChatTurn {
        messages: chat_messages(system, messages)?,
        tools: tools.map(chat_tools).transpose()?,
        tool_choice,
        parallel_tool_calls,
        chat_template_kwargs: thinking
            .map(|t| template_kwargs(t, max_tokens, reads_reasoning))
            .transpose()?,
        add_generation_prompt: !prefill,
        continue_final_message: prefill,
        add_special_tokens: false,
        grammar: None,
        reasoning_effort: None,
        ..ChatTurn::default()
    })
}

/// `thinking` as the `enable_thinking` template variable (Qwen3's and others' switch).
/// `budget_tokens` is checked as Anthropic checks it (at least 1024, below `max_tokens`); the
/// route turns it into a logit rule that ends the reasoning at the budget
/// (`routes::messages::thinking_budget`).
fn template_kwargs(
    thinking: ThinkingConfig,
    max_tokens: Option<usize>,
    reads_reasoning: bool,
) -> Result<Map<String, Value>, ApiError> {
    let enable = match thinking {
        ThinkingConfig::Disabled => false,
        ThinkingConfig::Enabled { .. } if !reads_reasoning => {
            return Err(ApiError::invalid_param(
                "thinking",
                "`thinking` needs a server that reads the model's reasoning (start it with \
                 --reasoning-parser)",
            ))
        }
        ThinkingConfig::Enabled { budget_tokens } => {
            let too_big = max_tokens.is_some_and(|m| budget_tokens as i128 >= m as i128);
            if budget_tokens < MIN_THINKING_BUDGET || too_big {
                return Err(ApiError::invalid_param(
                    "thinking",
                    format!(
                        "thinking.budget_tokens must be at least {MIN_THINKING_BUDGET} and less \
                         than max_tokens, got {budget_tokens}"
                    ),
                ));
            }
            true
        }
    };
    Ok(Map::from_iter([(
        "enable_thinking".to_string(),
        Value::Bool(enable),
    )]))
}

/// `any` is OpenAI's "required", `tool` a named function; `disable_parallel_tool_use` is
/// `parallel_tool_calls` negated.
fn chat_tool_choice(choice: AnthropicToolChoice) -> (ToolChoice, Option<bool>) {
    let parallel = |d: Option<bool>| d.map(|disable| !disable);
    match choice {
        AnthropicToolChoice::Auto {
            disable_parallel_tool_use: d,
        } => (ToolChoice::Mode(ToolChoiceMode::Auto), parallel(d)),
        AnthropicToolChoice::Any {
            disable_parallel_tool_use: d,
        } => (ToolChoice::Mode(ToolChoiceMode::Required), parallel(d)),
        AnthropicToolChoice::Tool {
            name,
            disable_parallel_tool_use: d,
        } => (
            ToolChoice::Named(NamedToolChoice {
                kind: ToolKind::Function,
                function: FunctionName { name },
            }),
            parallel(d),
        ),
        AnthropicToolChoice::None => (ToolChoice::Mode(ToolChoiceMode::None), None),
    }
}

fn chat_tools(tools: Vec<ToolDefinition>) -> Result<Vec<ToolSpec>, ApiError> {
    tools
        .into_iter()
        .enumerate()
        .map(|(i, t)| match t.kind.as_deref() {
            None | Some("custom") => Ok(ToolSpec {
                kind: ToolKind::Function,
                function: FunctionSpec {
                    name: t.name,
                    description: t.description,
                    parameters: Some(t.input_schema),
                    strict: None,
                },
            }),
            Some(other) => Err(ApiError::invalid_param(
                "tools",
                format!(
                    "tools[{i}]: tools of type `{other}` are not supported (custom tools only)"
                ),
            )),
        })
        .collect()
}

fn chat_messages(
    system: Option<SystemPrompt>,
    messages: Vec<InputMessage>,
) -> Result<Vec<ChatMessage>, ApiError> {
    let mut out = Vec::with_capacity(messages.len() + 1);
    match system {
        Some(SystemPrompt::Text(text)) => out.push(text_message("system", text)),
        Some(SystemPrompt::Blocks(blocks)) if !blocks.is_empty() => {
            let texts: Vec<String> = blocks.into_iter().map(|b| b.text).collect();
            out.push(text_message("system", texts.join("\n")));
        }
        Some(SystemPrompt::Blocks(_)) | None => {}
    }
    if let Some(last) = messages.last().filter(|m| m.role == "assistant") {
        check_prefill(messages.len() - 1, &last.content)?;
    }
    for (i, message) in messages.into_iter().enumerate() {
        match (message.role.as_str(), message.content) {
            ("user" | "assistant", InputContent::Text(text)) => {
                out.push(text_message(&message.role, text))
            }
            ("user", InputContent::Blocks(blocks)) => user_blocks(i, blocks, &mut out)?,
            ("assistant", InputContent::Blocks(blocks)) => out.push(assistant_blocks(i, blocks)?),
            (role, _) => {
                return Err(ApiError::invalid_param(
                    "messages",
                    format!("messages[{i}].role must be \"user\" or \"assistant\", got `{role}`"),
                ))
            }
        }
    }
    Ok(out)
}

/// A final assistant turn's text is where the answer goes on, so it may not end in whitespace
/// (Anthropic's 400: the model would continue after a space it did not write).
fn check_prefill(i: usize, content: &InputContent) -> Result<(), ApiError> {
    let ends_in_space = match content {
        InputContent::Text(t) => t.ends_with(char::is_whitespace),
        InputContent::Blocks(blocks) => blocks
            .iter()
            .rev()
            .find_map(|b| (block_type(b) == "text").then(|| b.get("text")?.as_str()))
            .flatten()
            .is_some_and(|t| t.ends_with(char::is_whitespace)),
    };
    match ends_in_space {
        true => Err(ApiError::invalid_param(
            "messages",
            format!("messages[{i}]: final assistant content cannot end with trailing whitespace"),
        )),
        false => Ok(()),
    }
}

/// A user message's blocks: text joins into a user message, each tool result is a `tool`
/// message, in the order they came.
fn user_blocks(i: usize, blocks: Vec<Value>, out: &mut Vec<ChatMessage>) -> Result<(), ApiError> {
    let mut texts: Vec<String> = Vec::new();
    for (j, block) in blocks.into_iter().enumerate() {
        match block_type(&block) {
            "text" => texts.push(read_block::<TextBlockParam>(i, j, block)?.text),
            "tool_result" => {
                if !texts.is_empty() {
                    out.push(text_message("user", texts.join("\n")));
                    texts.clear();
                }
                let result: ToolResultBlockParam = read_block(i, j, block)?;
                out.push(tool_message(i, j, result)?);
            }
            other => return Err(unsupported_block(i, j, other, "text, tool_result")),
        }
    }
    if !texts.is_empty() {
        out.push(text_message("user", texts.join("\n")));
    }
    Ok(())
}

/// An assistant message's blocks: one message, its text as content, its `tool_use` blocks as
/// `tool_calls`, an earlier turn's thinking as `reasoning_content` (templates that keep
/// reasoning read it there).
fn assistant_blocks(i: usize, blocks: Vec<Value>) -> Result<ChatMessage, ApiError> {
    let (mut texts, mut thinking, mut calls) = (Vec::new(), Vec::new(), Vec::new());
    for (j, block) in blocks.into_iter().enumerate() {
        match block_type(&block) {
            "text" => texts.push(read_block::<TextBlockParam>(i, j, block)?.text),
            "thinking" => thinking.push(read_block::<ThinkingBlockParam>(i, j, block)?.thinking),
            "tool_use" => {
                let call: ToolUseBlockParam = read_block(i, j, block)?;
                let arguments = Value::Object(call.input).to_string();
                let call = ToolCall::new(call.id, call.name, arguments);
                calls.push(serde_json::to_value(call).map_err(|e| {
                    ApiError::internal(format!("cannot write a tool call for the template: {e}"))
                })?);
            }
            other => return Err(unsupported_block(i, j, other, "text, thinking, tool_use")),
        }
    }
    let mut extra = Map::new();
    if !calls.is_empty() {
        extra.insert("tool_calls".into(), Value::Array(calls));
    }
    if !thinking.is_empty() {
        extra.insert(
            "reasoning_content".into(),
            Value::String(thinking.join("\n")),
        );
    }
    Ok(ChatMessage {
        role: "assistant".into(),
        content: (!texts.is_empty() || extra.is_empty())
            .then(|| MessageContent::Text(texts.join("\n"))),
        extra,
    })
}

/// A tool result as the `tool` message templates render; `is_error` results say so in front,
/// since templates have no field for it.
fn tool_message(i: usize, j: usize, result: ToolResultBlockParam) -> Result<ChatMessage, ApiError> {
    let mut text = match result.content {
        None => String::new(),
        Some(ToolResultContent::Text(t)) => t,
        Some(ToolResultContent::Blocks(blocks)) => {
            let mut texts = Vec::new();
            for block in blocks {
                match block_type(&block) {
                    "text" => texts.push(read_block::<TextBlockParam>(i, j, block)?.text),
                    other => return Err(unsupported_block(i, j, other, "text")),
                }
            }
            texts.join("\n")
        }
    };
    if result.is_error {
        text.insert_str(0, "Error: ");
    }
    let mut message = text_message("tool", text);
    message
        .extra
        .insert("tool_call_id".into(), Value::String(result.tool_use_id));
    Ok(message)
}

fn text_message(role: &str, text: String) -> ChatMessage {
    ChatMessage {
        role: role.to_string(),
        content: Some(MessageContent::Text(text)),
        extra: Map::new(),
    }
}

fn block_type(block: &Value) -> &str {
    block.get("type").and_then(Value::as_str).unwrap_or("")
}

fn read_block<T: DeserializeOwned>(i: usize, j: usize, block: Value) -> Result<T, ApiError> {
    serde_json::from_value(block).map_err(|e| {
        ApiError::invalid_param("messages", format!("messages[{i}].content[{j}]: {e}"))
    })
}

fn unsupported_block(i: usize, j: usize, kind: &str, allowed: &str) -> ApiError {
    ApiError::invalid_param(
        "messages",
        format!(
            "messages[{i}].content[{j}]: content blocks of type `{kind}` are not supported here \
             ({allowed} only)"
        ),
    )
}

#[cfg(test)]
mod tests;
