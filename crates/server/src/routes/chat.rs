//! `POST /v1/chat/completions`.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::answer::{respond, AnswerShape};
use super::beam_answer::{self, beam_options, refuse_lone_length_penalty};
use super::chat_stream::{finish_reason, ChatChunks};
use super::request_id::adopt_body_request_id;
use crate::app::state::AppState;
use crate::error::ApiError;
use crate::generation::chat_turn::{start_chat, turn_inputs, ChatTurn, StartedChat};
use crate::generation::reasoning_effort::RequestedEffort;
use crate::generation::submission::ChoiceResult;
use crate::generation::verbosity::RequestedVerbosity;
use crate::json_body::JsonBody;
use crate::openai::chat::ChatRequest;
use crate::openai::legacy_functions::{modernize_messages, tool_fields};
use crate::openai::logprobs::ChatLogprobs;
use crate::openai::prompt_logprobs::PromptLogprobs;
use crate::openai::response::{AssistantMessage, ChatChoice, ChatCompletion, ResponseMeta};
use crate::openai::sampling::check_top_logprobs;
use crate::openai::tools::{new_call_id, ToolCall};
use crate::openai::usage::Usage;
use crate::output::assistant_output::{parse_answer, OutputSpec};
use crate::text::messages::LogprobEntry;

pub async fn chat_completions(
    State(state): State<Arc<AppState>>,
    JsonBody(req): JsonBody<ChatRequest>,
) -> Result<Response, ApiError> {
    adopt_body_request_id(req.request_id.as_deref())?;
    state.check_model(req.model.as_deref())?;
    req.refuse_unimplemented()?;
    let top = req
        .top_logprobs
        .map(|n| check_top_logprobs("top_logprobs", n))
        .transpose()?;
    let logprobs = req.logprobs.then(|| top.unwrap_or(0));
    let (add_generation_prompt, continue_final_message) = req.prompt_ending()?;
    let tools = tool_fields(
        req.tools,
        req.tool_choice,
        req.parallel_tool_calls,
        req.functions,
        req.function_call,
    )?;
    let mut messages = req.messages;
    modernize_messages(&mut messages);
    let mut sampling = req.sampling.validate(logprobs, &state.sampling_defaults)?;
    if req.use_beam_search {
        let conflicts = [
            ("logprobs", logprobs.is_some()),
            ("tools", tools.tools.as_ref().is_some_and(|t| !t.is_empty())),
            ("response_format", req.structured.grammar()?.is_some()),
            ("reasoning_effort", req.reasoning_effort.is_some()),
            ("verbosity", req.verbosity.is_some()),
        ];
        let options = beam_options(&state, &sampling, req.length_penalty, None, &conflicts)?;
        let turn = ChatTurn {
            messages,
            chat_template: req.chat_template,
            documents: req.documents,
            add_generation_prompt,
            continue_final_message,
            add_special_tokens: req.add_special_tokens.unwrap_or(false),
            ..ChatTurn::default()
        };
        let inputs = turn_inputs(&state, turn, req.chat_template_kwargs)?;
        let prompt = state.tokenizers.render_chat_inputs(inputs).await?.ids;
        let meta = ResponseMeta::new(
            format!("chatcmpl-{}", state.client_request_id()),
            state.model_name.clone(),
        );
        // The beams' text as generated: no reasoning or tool-call parsing.
        let shape = Shape {
            logprobs: false,
            prompt_logprobs: None,
            prompt_ids: sampling.return_token_ids.then(|| prompt.clone()),
            output: OutputSpec::default(),
            legacy_functions: false,
        };
        let prompts = [prompt];
        let complete = beam_answer::answer(&state, &prompts, &sampling, options, meta, shape);
        return Ok(Json(complete.await?).into_response());
    }
    refuse_lone_length_penalty(req.length_penalty)?;
    let turn = ChatTurn {
        messages,
        tools: tools.tools,
        tool_choice: tools.tool_choice,
        parallel_tool_calls: tools.parallel_tool_calls,
        chat_template_kwargs: req.chat_template_kwargs,
        chat_template: req.chat_template,
        documents: req.documents,
        add_generation_prompt,
        continue_final_message,
        add_special_tokens: req.add_special_tokens.unwrap_or(false),
        grammar: req.structured.grammar()?,
        reasoning_effort: req.reasoning_effort.map(|effort| RequestedEffort {
            effort,
            param: "reasoning_effort",
        }),
        verbosity: req.verbosity.map(|level| RequestedVerbosity {
            level,
            param: "verbosity",
        }),
    };
    let StartedChat { submission, output } = start_chat(&state, turn, &mut sampling).await?;
    let meta = ResponseMeta::new(
        format!("chatcmpl-{}", state.client_request_id()),
        state.model_name.clone(),
    );
    let shape = Shape {
        logprobs: logprobs.is_some(),
        prompt_logprobs: sampling.prompt_logprobs,
        prompt_ids: sampling
            .return_token_ids
            .then(|| submission.prompt_ids.to_vec()),
        output,
        legacy_functions: tools.legacy,
    };
    respond(submission, meta, &sampling, shape).await
}

/// What shapes the answer, shared by the streaming and the complete form.
struct Shape {
    logprobs: bool,
    /// vLLM's `prompt_logprobs` (never with `stream`).
    prompt_logprobs: Option<usize>,
    /// `Some` when the client asked for `return_token_ids`.
    prompt_ids: Option<Vec<u32>>,
    /// How the generated text splits into reasoning, content and tool calls.
    output: OutputSpec,
    /// The request sent the legacy `functions`: a call is answered as `function_call`.
    legacy_functions: bool,
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
        let prompt_logprobs = self.prompt_logprobs.and_then(|n| {
            let entries = results.first()?.prompt.as_ref()?.prompt_logprobs.as_ref()?;
            Some(PromptLogprobs::new(entries, n))
        });
        let choices = results
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let (message, called_tools) = self.message(r.text);
                ChatChoice {
                    index: i,
                    logprobs: self.logprobs(&r.logprobs),
                    message,
                    finish_reason: r
                        .finish
                        .map(|f| finish_reason(f, called_tools, self.legacy_functions)),
                    stop_reason: r.stop_reason,
                    token_ids: self.return_token_ids().then_some(r.token_ids),
                }
            })
            .collect();
        ChatCompletion {
            prompt_logprobs,
            ..ChatCompletion::new(meta, choices, usage, self.prompt_ids)
        }
    }

    fn into_chunks(self, num_choices: usize) -> ChatChunks {
        ChatChunks::new(
            &self.output,
            self.logprobs,
            self.prompt_ids,
            num_choices,
            self.legacy_functions,
        )
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
        let message = AssistantMessage::with_parts(answer.content, answer.reasoning, calls);
        match self.legacy_functions {
            true => (message.into_legacy(), called),
            false => (message, called),
        }
    }
}
