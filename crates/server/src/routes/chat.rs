//! `POST /v1/chat/completions`.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;

use super::answer::{respond, AnswerShape};
use super::chat_stream::{finish_reason, ChatChunks};
use crate::assistant_output::{parse_answer, OutputSpec};
use crate::detokenizer::LogprobEntry;
use crate::error::ApiError;
use crate::generation::{submit, ChoiceResult};
use crate::json_body::JsonBody;
use crate::openai::chat::{template_inputs, ChatRequest};
use crate::openai::logprobs::ChatLogprobs;
use crate::openai::response::{AssistantMessage, ChatChoice, ChatCompletion, ResponseMeta};
use crate::openai::sampling::check_top_logprobs;
use crate::openai::tools::{new_call_id, ToolCall, ToolChoice, ToolChoiceMode, ToolSpec};
use crate::openai::usage::Usage;
use crate::state::AppState;
use crate::structured::requested_constraint;
use crate::tool_calls::{ToolCallFormat, ToolParsing};

pub async fn chat_completions(
    State(state): State<Arc<AppState>>,
    JsonBody(req): JsonBody<ChatRequest>,
) -> Result<Response, ApiError> {
    state.check_model(req.model.as_deref())?;
    req.refuse_unimplemented()?;
    let top = req
        .top_logprobs
        .map(|n| check_top_logprobs("top_logprobs", n))
        .transpose()?;
    let logprobs = req.logprobs.then(|| top.unwrap_or(0));
    let mut sampling = req.sampling.validate(logprobs, &state.sampling_defaults)?;
    if req.messages.is_empty() {
        return Err(ApiError::invalid_param(
            "messages",
            "messages must not be empty",
        ));
    }
    let tools = tool_parsing(
        req.tools.as_deref(),
        req.tool_choice.as_ref(),
        req.parallel_tool_calls,
        state.tool_format,
    )?;
    if tools
        .as_ref()
        .is_some_and(|t| t.format.needs_special_tokens())
    {
        sampling.skip_special_tokens = false;
    }
    let inputs = template_inputs(
        req.messages,
        req.add_generation_prompt.unwrap_or(true),
        req.tools.as_deref(),
        req.chat_template_kwargs,
    )?;
    // The grammar compiles while the template renders: neither waits for the other.
    let (prompt, constraint) = tokio::join!(
        state.tokenizers.render_chat_inputs(inputs),
        requested_constraint(&state.grammars, &req.structured),
    );
    let prompt = prompt?;
    sampling.params.constraint = constraint?;
    let output = OutputSpec {
        reasoning: state
            .reasoning_format
            .map(|f| (f, f.starts_in_reasoning(&prompt.text))),
        tools,
    };
    let submission = submit(&state, prompt.ids, &sampling, None, None)?;
    let meta = ResponseMeta::new(
        format!("chatcmpl-{}", state.next_request_id()),
        state.model_name.clone(),
    );
    let shape = Shape {
        logprobs: logprobs.is_some(),
        prompt_ids: sampling
            .return_token_ids
            .then(|| submission.prompt_ids.to_vec()),
        output,
    };
    respond(submission, meta, &sampling, shape).await
}

/// Whether the answers are read for tool calls: in which format, and `parallel_tool_calls`.
/// `tool_choice` "none" renders the tools but reads no calls (as vLLM does); "required" and a
/// named function need the output constrained to a call, which needs structured outputs.
fn tool_parsing(
    tools: Option<&[ToolSpec]>,
    choice: Option<&ToolChoice>,
    parallel: Option<bool>,
    format: Option<ToolCallFormat>,
) -> Result<Option<ToolParsing>, ApiError> {
    match choice {
        Some(ToolChoice::Mode(ToolChoiceMode::Required)) | Some(ToolChoice::Named(_)) => {
            return Err(ApiError {
                code: Some("unsupported_parameter"),
                ..ApiError::invalid_param(
                    "tool_choice",
                    "`tool_choice` \"required\" or a named function is not supported yet: it \
                     needs the output constrained to a tool call (structured outputs); use \
                     \"auto\"",
                )
            });
        }
        Some(ToolChoice::Mode(ToolChoiceMode::None)) => return Ok(None),
        Some(ToolChoice::Mode(ToolChoiceMode::Auto)) | None => {}
    }
    let Some(tools) = tools.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let format = format.ok_or_else(|| {
        ApiError::invalid_param(
            "tools",
            "this model's chat template has no known tool-call format; start the server with \
             --tool-call-parser hermes|llama3_json|mistral to use tools",
        )
    })?;
    Ok(Some(ToolParsing {
        format,
        parallel: parallel.unwrap_or(true),
        tool_names: tools.iter().map(|t| t.function.name.clone()).collect(),
    }))
}

/// What shapes the answer, shared by the streaming and the complete form.
struct Shape {
    logprobs: bool,
    /// `Some` when the client asked for `return_token_ids`.
    prompt_ids: Option<Vec<u32>>,
    /// How the generated text splits into reasoning, content and tool calls.
    output: OutputSpec,
}

impl Shape {
    fn return_token_ids(&self) -> bool {
        self.prompt_ids.is_some()
    }

    fn logprobs(&self, entries: &[LogprobEntry]) -> Option<ChatLogprobs> {
        self.logprobs.then(|| ChatLogprobs::new(entries))
    }
}

impl AnswerShape for Shape {
    type Complete = ChatCompletion;
    type Chunks = ChatChunks;

    fn complete(
        self,
        meta: ResponseMeta,
        results: Vec<ChoiceResult>,
        usage: Usage,
    ) -> ChatCompletion {
        let choices = results
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let (message, called_tools) = self.message(r.text);
                ChatChoice {
                    index: i,
                    logprobs: self.logprobs(&r.logprobs),
                    message,
                    finish_reason: r.finish.map(|f| finish_reason(f, called_tools)),
                    token_ids: self.return_token_ids().then_some(r.token_ids),
                }
            })
            .collect();
        ChatCompletion::new(meta, choices, usage, self.prompt_ids)
    }

    fn into_chunks(self, num_choices: usize) -> ChatChunks {
        ChatChunks::new(&self.output, self.logprobs, self.prompt_ids, num_choices)
    }
}

impl Shape {
    /// The assistant's message for the whole generated text, and whether it calls tools.
    fn message(&self, text: String) -> (AssistantMessage, bool) {
        if self.output.is_plain() {
            return (AssistantMessage::new(text), false);
        }
        let answer = parse_answer(&self.output, &text);
        let calls: Vec<ToolCall> = answer
            .tool_calls
            .into_iter()
            .map(|c| ToolCall::new(new_call_id(), c.name, c.arguments))
            .collect();
        let called = !calls.is_empty();
        (
            AssistantMessage::with_parts(answer.content, answer.reasoning, calls),
            called,
        )
    }
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
        let e = tool_parsing(Some(&tools), Some(&required), None, hermes).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("tool_choice"));
        let unknown_format = tool_parsing(Some(&tools), None, Some(false), None).unwrap_err();
        assert_eq!(unknown_format.param.as_deref(), Some("tools"));
    }
}
