//! `POST /v1/chat/completions`.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::api_json::ApiJson;
use crate::detokenizer::Delta;
use crate::error::ApiError;
use crate::generation::{submit, usage_of, ChoiceResult};
use crate::openai::chat::{chat_logprobs, ChatMessage, ChatRequest};
use crate::openai::common::{check_top_logprobs, unix_now, Usage};
use crate::sse::{sse_response, ChunkFormatter};
use crate::state::AppState;

pub async fn chat_completions(
    State(state): State<Arc<AppState>>,
    ApiJson(req): ApiJson<ChatRequest>,
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
    let prompt_len = prompt.ids.len();
    let submission = submit(&state, prompt.ids, &sampling, None, None)?;
    let shape = Shape {
        id: format!("chatcmpl-{}", state.next_request_id()),
        created: unix_now(),
        model: state.model_name.clone(),
        logprobs: logprobs.is_some(),
        return_token_ids: sampling.return_token_ids,
        prompt_ids: submission.prompt_ids.to_vec(),
    };
    if sampling.stream {
        let formatter = StreamState {
            include_usage: sampling.include_usage,
            started: vec![false; submission.num_choices()],
            completion_tokens: 0,
            cached_tokens: 0,
            prompt_tokens: prompt_len,
            shape,
        };
        return Ok(sse_response(submission, formatter));
    }
    let results = submission.collect().await?;
    Ok(Json(shape.full_response(&results)).into_response())
}

struct Shape {
    id: String,
    created: u64,
    model: String,
    logprobs: bool,
    return_token_ids: bool,
    prompt_ids: Vec<u32>,
}

impl Shape {
    fn full_response(&self, results: &[ChoiceResult]) -> Value {
        let choices: Vec<Value> = results
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut choice = json!({
                    "index": i,
                    "message": {"role": "assistant", "content": r.text},
                    "logprobs": if self.logprobs { chat_logprobs(&r.logprobs) } else { Value::Null },
                    "finish_reason": r.finish.map(|f| f.as_openai()),
                });
                if self.return_token_ids {
                    choice["token_ids"] = json!(r.token_ids);
                }
                choice
            })
            .collect();
        let refs: Vec<&ChoiceResult> = results.iter().collect();
        let mut body = json!({
            "id": self.id, "object": "chat.completion", "created": self.created,
            "model": self.model, "choices": choices,
            "usage": usage_of(self.prompt_ids.len(), &refs),
        });
        if self.return_token_ids {
            body["prompt_token_ids"] = json!(self.prompt_ids);
        }
        body
    }
}

struct StreamState {
    shape: Shape,
    include_usage: bool,
    /// Whether a choice's first chunk (with the role) has gone out.
    started: Vec<bool>,
    completion_tokens: usize,
    cached_tokens: usize,
    prompt_tokens: usize,
}

impl StreamState {
    fn chunk(&self, choices: Vec<Value>) -> Value {
        crate::sse::chunk_envelope(
            &self.shape.id,
            "chat.completion.chunk",
            self.shape.created,
            &self.shape.model,
            self.include_usage,
            choices,
        )
    }
}

impl ChunkFormatter for StreamState {
    fn on_delta(&mut self, i: usize, delta: Delta) -> Vec<Value> {
        self.completion_tokens += delta.token_ids.len();
        if let (0, Some(p)) = (i, &delta.prompt) {
            self.cached_tokens = p.num_cached_tokens;
        }
        let mut out = Vec::new();
        if let Some(started) = self.started.get_mut(i).filter(|s| !**s) {
            *started = true;
            let mut first = json!({"index": i, "delta": {"role": "assistant", "content": ""},
                "logprobs": null, "finish_reason": null});
            if self.shape.return_token_ids {
                first["token_ids"] = json!([]);
            }
            let mut chunk = self.chunk(vec![first]);
            if self.shape.return_token_ids {
                chunk["prompt_token_ids"] = json!(self.shape.prompt_ids);
            }
            out.push(chunk);
        }
        let ids_to_send = self.shape.return_token_ids && !delta.token_ids.is_empty();
        if delta.text.is_empty()
            && delta.finish.is_none()
            && delta.logprobs.is_empty()
            && !ids_to_send
        {
            return out;
        }
        let content = if delta.text.is_empty() && delta.finish.is_some() {
            json!({})
        } else {
            json!({"content": delta.text})
        };
        let mut choice = json!({
            "index": i,
            "delta": content,
            "logprobs": if self.shape.logprobs { chat_logprobs(&delta.logprobs) } else { Value::Null },
            "finish_reason": delta.finish.map(|f| f.as_openai()),
        });
        if self.shape.return_token_ids {
            choice["token_ids"] = json!(delta.token_ids);
        }
        out.push(self.chunk(vec![choice]));
        out
    }

    fn on_end(&mut self) -> Vec<Value> {
        if !self.include_usage {
            return Vec::new();
        }
        let mut chunk = self.chunk(Vec::new());
        chunk["usage"] = json!(Usage::new(
            self.prompt_tokens,
            self.completion_tokens,
            self.cached_tokens
        ));
        vec![chunk]
    }
}
