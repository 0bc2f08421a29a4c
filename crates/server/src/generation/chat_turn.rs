//! One assistant turn of a conversation, as every chat-shaped API asks for it: OpenAI's chat
//! completions, the Responses API and Anthropic's Messages translate their requests into a
//! [`ChatTurn`], and [`start_chat`] works out how the answer is read (reasoning, tool calls)
//! and which grammar a forced tool call needs, then hands the template's rendering to the
//! submission path every route shares ([`super::submit`]). Only the wire format of the answer
//! differs between the APIs.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::reasoning_effort::{apply_effort, RequestedEffort};
use super::submission::Submission;
use super::submit::{submit, SubmitOptions, Submitted};
use super::verbosity::{apply_verbosity, RequestedVerbosity};
use crate::app::state::AppState;
use crate::error::ApiError;
use crate::openai::chat::{request_template, template_inputs, ChatMessage};
use crate::openai::sampling::ValidatedSampling;
use crate::openai::structured::{GrammarRequest, RequestedGrammar};
use crate::openai::tools::{ToolChoice, ToolChoiceMode, ToolSpec};
use crate::output::assistant_output::{is_harmony, OutputSpec};
use crate::output::harmony_grammar::{analysis_budget, harmony_lark, HarmonyAnswer};
use crate::output::tool_calls::{forced_call_grammar, ToolCallFormat, ToolParsing};
use crate::text::chat_template::template_reads_verbosity;
use crate::text::chat_template::ChatInputs;
use crate::text::harmony_inputs::harmony_messages;

/// What the model is asked for, whichever API asked.
#[derive(Debug, Default)]
pub struct ChatTurn {
    pub messages: Vec<ChatMessage>,
    pub tools: Option<Vec<ToolSpec>>,
    pub tool_choice: Option<ToolChoice>,
    pub parallel_tool_calls: Option<bool>,
    /// Extra chat-template variables (`enable_thinking`, ...).
    pub chat_template_kwargs: Option<Map<String, Value>>,
    /// The request's own chat template (`--trust-request-chat-template`).
    pub chat_template: Option<String>,
    /// The template's `documents` variable.
    pub documents: Option<Vec<Value>>,
    /// False when the client continues a partial assistant message.
    pub add_generation_prompt: bool,
    /// The final message is continued, not closed (assistant prefill).
    pub continue_final_message: bool,
    /// The tokenizer's own special tokens added to the rendered prompt.
    pub add_special_tokens: bool,
    /// The output constraint the request asked for (`response_format`, ...).
    pub grammar: Option<RequestedGrammar>,
    /// `reasoning_effort` / `reasoning.effort`, for templates that take it.
    pub reasoning_effort: Option<RequestedEffort>,
    /// `verbosity` / `text.verbosity`, for templates that take it.
    pub verbosity: Option<RequestedVerbosity>,
}

/// The template's inputs for `turn` with `kwargs` as its variables: the request's own template
/// (where the server trusts it) and `documents` taken in, gpt-oss's messages prepared for its
/// template. Every chat-shaped answer renders its prompt from these (beam search too).
pub fn turn_inputs(
    state: &AppState,
    turn: ChatTurn,
    mut kwargs: Option<Map<String, Value>>,
) -> Result<ChatInputs, ApiError> {
    let own_template = request_template(
        state.trust_request_chat_template,
        turn.chat_template,
        turn.documents,
        &mut kwargs,
    )?;
    let mut inputs = template_inputs(
        turn.messages,
        turn.add_generation_prompt,
        turn.tools.as_deref(),
        kwargs,
    )?;
    inputs.continue_final_message = turn.continue_final_message;
    inputs.template = own_template;
    inputs.add_special_tokens = turn.add_special_tokens;
    if state.harmony_template {
        harmony_messages(&mut inputs.messages);
    }
    Ok(inputs)
}

/// The running turn: its engine requests and how their text is read.
pub struct StartedChat {
    pub submission: Submission,
    pub output: OutputSpec,
}

/// Works out how `turn` is read (tool calls, reasoning) and which grammar forces a tool call,
/// then renders and submits it.
pub async fn start_chat(
    state: &Arc<AppState>,
    mut turn: ChatTurn,
    sampling: &mut ValidatedSampling,
) -> Result<StartedChat, ApiError> {
    if turn.messages.is_empty() {
        return Err(ApiError::invalid_param(
            "messages",
            "messages must not be empty",
        ));
    }
    let tools = tool_parsing(
        turn.tools.as_deref(),
        turn.tool_choice.as_ref(),
        turn.parallel_tool_calls,
        state.tool_format,
    )?;
    let harmony = is_harmony(state.reasoning_format, tools.as_ref().map(|t| t.format));
    if harmony
        || tools
            .as_ref()
            .is_some_and(|t| t.format.needs_special_tokens())
    {
        sampling.skip_special_tokens = false;
    }
    // A harmony answer may reason before the constrained message: at most this many tokens.
    let analysis_tokens = analysis_budget(sampling.max_tokens);
    let mut chat_template_kwargs = turn.chat_template_kwargs.take();
    apply_effort(
        turn.reasoning_effort.take(),
        state.template_reads_effort,
        &mut chat_template_kwargs,
    )?;
    // The request's own template, where it sends one, is the one that must read it.
    let reads_verbosity = match &turn.chat_template {
        Some(template) => template_reads_verbosity(template),
        None => state.template_reads_verbosity,
    };
    apply_verbosity(
        turn.verbosity.take(),
        reads_verbosity,
        &mut chat_template_kwargs,
    )?;
    let forced = forced_call(&turn, tools.as_ref(), state, analysis_tokens)?;
    let is_forced = forced.is_some();
    let tools = tools.map(|t| ToolParsing {
        forced: is_forced,
        ..t
    });
    let grammar = match forced {
        Some(_) if turn.grammar.is_some() => {
            return Err(ApiError::invalid_param(
                "tool_choice",
                "`tool_choice` \"required\" or a named function cannot be combined with an \
                 output constraint (response_format, structured_outputs)",
            ));
        }
        Some(forced) => Some(forced),
        None if harmony => turn
            .grammar
            .take()
            .map(|asked| harmony_final(asked, &turn, tools.as_ref(), state, analysis_tokens)),
        None => turn.grammar.take(),
    };
    let inputs = turn_inputs(state, turn, chat_template_kwargs)?;
    let render = state.tokenizers.render_chat_inputs(inputs);
    let options = SubmitOptions {
        grammar,
        ..SubmitOptions::default()
    };
    let Submitted { prompt, submission } = submit(state, render, sampling, options).await?;
    // A forced call's grammar makes the answer the call blocks from its first token, even
    // where the prompt opened a think block (Qwen3.5's, DeepSeek-R1's templates): none of it
    // is reasoning.
    let output = OutputSpec {
        reasoning: state
            .reasoning_format
            .map(|f| (f, !is_forced && f.starts_in_reasoning(&prompt.text))),
        tools,
    };
    Ok(StartedChat { submission, output })
}

/// A harmony answer's output constraint, held to its final message; where the request reads
/// calls (tools offered, `tool_choice` "auto") a call is the other way out.
fn harmony_final(
    asked: RequestedGrammar,
    turn: &ChatTurn,
    tools: Option<&ToolParsing>,
    state: &AppState,
    analysis_tokens: usize,
) -> RequestedGrammar {
    let callable: Vec<&ToolSpec> = match (tools, turn.tools.as_deref()) {
        (Some(_), Some(specs)) => specs.iter().collect(),
        _ => Vec::new(),
    };
    let answer = HarmonyAnswer::Final {
        output: &asked.grammar,
        tools: &callable,
    };
    let lark = harmony_lark(&answer, analysis_tokens, |marker| {
        state.grammars.single_token_id(marker)
    });
    RequestedGrammar {
        grammar: GrammarRequest::Lark(lark),
        param: asked.param,
    }
}

/// The grammar that forces a tool call, for `tool_choice` "required" or a named function.
fn forced_call(
    turn: &ChatTurn,
    tools: Option<&ToolParsing>,
    state: &AppState,
    analysis_tokens: usize,
) -> Result<Option<RequestedGrammar>, ApiError> {
    let named = match &turn.tool_choice {
        Some(ToolChoice::Named(n)) => Some(n.function.name.as_str()),
        Some(ToolChoice::Mode(ToolChoiceMode::Required)) => None,
        _ => return Ok(None),
    };
    let (Some(parsing), Some(specs)) = (tools, turn.tools.as_deref()) else {
        return Err(ApiError::invalid_param(
            "tool_choice",
            "`tool_choice` asks for a tool call but the request offers no tools",
        ));
    };
    let offered: Vec<&ToolSpec> = specs
        .iter()
        .filter(|t| named.is_none_or(|n| t.function.name == n))
        .collect();
    if offered.is_empty() {
        return Err(ApiError::invalid_param(
            "tool_choice",
            format!(
                "`tool_choice` names the function `{}`, which is not among the tools",
                named.unwrap_or_default()
            ),
        ));
    }
    let parallel = parsing.parallel && named.is_none();
    let token_id = |marker: &str| state.grammars.single_token_id(marker);
    let grammar = match parsing.format {
        ToolCallFormat::Openai => {
            let answer = HarmonyAnswer::Call(&offered);
            GrammarRequest::Lark(harmony_lark(&answer, analysis_tokens, token_id))
        }
        format => forced_call_grammar(format, &offered, parallel, token_id),
    };
    Ok(Some(RequestedGrammar {
        grammar,
        param: "tools",
    }))
}

/// Whether the answers are read for tool calls: in which format, and `parallel_tool_calls`.
/// `tool_choice` "none" renders the tools but reads no calls (as vLLM does).
fn tool_parsing(
    tools: Option<&[ToolSpec]>,
    choice: Option<&ToolChoice>,
    parallel: Option<bool>,
    format: Option<ToolCallFormat>,
) -> Result<Option<ToolParsing>, ApiError> {
    if let Some(ToolChoice::Mode(ToolChoiceMode::None)) = choice {
        return Ok(None);
    }
    let Some(tools) = tools.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let format = format.ok_or_else(|| {
        ApiError::invalid_param(
            "tools",
            "this model's chat template has no known tool-call format; start the server with \
             --tool-call-parser hermes|qwen3_coder|llama3_json|mistral|openai to use tools",
        )
    })?;
    Ok(Some(ToolParsing {
        format,
        parallel: parallel.unwrap_or(true),
        tool_names: tools.iter().map(|t| t.function.name.clone()).collect(),
        tool_schemas: tools
            .iter()
            .filter_map(|t| {
                let parameters = t.function.parameters.clone()?;
                Some((t.function.name.clone(), parameters))
            })
            .collect(),
        forced: false,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> ToolSpec {
        serde_json::from_value(serde_json::json!({"type": "function", "function": {"name": name}}))
            .unwrap()
    }

    #[test]
    fn tool_choice_decides_whether_calls_are_read() {
        let tools = [spec("f")];
        let hermes = Some(ToolCallFormat::Hermes);
        let auto = tool_parsing(Some(&tools), None, None, hermes).unwrap();
        let auto = auto.unwrap();
        assert_eq!((auto.format, auto.parallel), (ToolCallFormat::Hermes, true));
        assert_eq!(&auto.tool_names[..], ["f".to_string()]);
        let none = ToolChoice::Mode(ToolChoiceMode::None);
        assert_eq!(
            tool_parsing(Some(&tools), Some(&none), None, hermes).unwrap(),
            None
        );
        assert_eq!(tool_parsing(None, None, None, None).unwrap(), None);
        let required = ToolChoice::Mode(ToolChoiceMode::Required);
        let read = tool_parsing(Some(&tools), Some(&required), None, hermes).unwrap();
        assert!(read.is_some(), "a required call is read like any other");
        let unknown_format = tool_parsing(Some(&tools), None, Some(false), None).unwrap_err();
        assert_eq!(unknown_format.param.as_deref(), Some("tools"));
    }

    #[test]
    fn the_offered_tools_schemas_come_along_for_typed_arguments() {
        let schema =
            serde_json::json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let typed: ToolSpec = serde_json::from_value(serde_json::json!({"type": "function",
            "function": {"name": "g", "parameters": schema}}))
        .unwrap();
        let tools = [spec("f"), typed];
        let qwen = Some(ToolCallFormat::Qwen3Coder);
        let parsing = tool_parsing(Some(&tools), None, None, qwen)
            .unwrap()
            .unwrap();
        assert_eq!(&parsing.tool_schemas[..], [("g".to_string(), schema)]);
    }
}
