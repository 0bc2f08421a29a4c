//! `POST /v1/chat/completions`.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;

use super::answer::{respond, AnswerShape, ChunkFormatter, ChunkPart};
use crate::detokenizer::{Delta, Finish, LogprobEntry};
use crate::error::ApiError;
use crate::generation::{submit, ChoiceResult};
use crate::json_body::JsonBody;
use crate::openai::chat::{ChatMessage, ChatRequest};
use crate::openai::chunk::{ChatChunkChoice, ChatDelta};
use crate::openai::logprobs::ChatLogprobs;
use crate::openai::response::{AssistantMessage, ChatChoice, ChatCompletion, ResponseMeta};
use crate::openai::sampling::check_top_logprobs;
use crate::openai::usage::Usage;
use crate::state::AppState;

pub async fn chat_completions(
    State(state): State<Arc<AppState>>,
    JsonBody(req): JsonBody<ChatRequest>,
) -> Result<Response, ApiError> {
    state.check_model(req.model.as_deref())?;
    let top = req
        .top_logprobs
        .map(|n| check_top_logprobs("top_logprobs", n))
        .transpose()?;
    let logprobs = req.logprobs.then(|| top.unwrap_or(0));
    let sampling = req.sampling.validate(logprobs)?;
    if req.messages.is_empty() {
        return Err(ApiError::invalid_param(
            "messages",
            "messages must not be empty",
        ));
    }
    let messages = req
        .messages
        .into_iter()
        .map(ChatMessage::into_template_value)
        .collect::<Result<Vec<_>, _>>()?;
    let prompt = state
        .tokenizers
        .render_chat(messages, req.add_generation_prompt.unwrap_or(true))
        .await?;
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
    };
    respond(submission, meta, &sampling, shape).await
}

/// What shapes the answer, shared by the streaming and the complete form.
struct Shape {
    logprobs: bool,
    /// `Some` when the client asked for `return_token_ids`.
    prompt_ids: Option<Vec<u32>>,
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
            .map(|(i, r)| ChatChoice {
                index: i,
                logprobs: self.logprobs(&r.logprobs),
                message: AssistantMessage::new(r.text),
                finish_reason: r.finish.map(Finish::as_openai),
                token_ids: self.return_token_ids().then_some(r.token_ids),
            })
            .collect();
        ChatCompletion::new(meta, choices, usage, self.prompt_ids)
    }

    fn into_chunks(self, num_choices: usize) -> ChatChunks {
        ChatChunks {
            shape: self,
            started: vec![false; num_choices],
        }
    }
}

struct ChatChunks {
    shape: Shape,
    /// Whether a choice's first chunk (with the role) has gone out.
    started: Vec<bool>,
}

impl ChunkFormatter for ChatChunks {
    type Choice = ChatChunkChoice;

    fn on_delta(&mut self, i: usize, delta: Delta) -> Vec<ChunkPart<ChatChunkChoice>> {
        let return_token_ids = self.shape.return_token_ids();
        let mut out = Vec::new();
        if let Some(started) = self.started.get_mut(i).filter(|s| !**s) {
            *started = true;
            out.push(ChunkPart {
                choice: ChatChunkChoice {
                    index: i,
                    delta: ChatDelta::start(),
                    logprobs: None,
                    finish_reason: None,
                    token_ids: return_token_ids.then(Vec::new),
                },
                prompt_token_ids: self.shape.prompt_ids.clone(),
            });
        }
        let ids_to_send = return_token_ids && !delta.token_ids.is_empty();
        if delta.text.is_empty()
            && delta.finish.is_none()
            && delta.logprobs.is_empty()
            && !ids_to_send
        {
            return out;
        }
        let content = if delta.text.is_empty() && delta.finish.is_some() {
            ChatDelta::default()
        } else {
            ChatDelta::content(delta.text)
        };
        out.push(ChunkPart::new(ChatChunkChoice {
            index: i,
            delta: content,
            logprobs: self.shape.logprobs(&delta.logprobs),
            finish_reason: delta.finish.map(Finish::as_openai),
            token_ids: return_token_ids.then_some(delta.token_ids),
        }));
        out
    }
}
