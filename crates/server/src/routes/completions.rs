//! `POST /v1/completions`.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::api_json::ApiJson;
use crate::detokenizer::{Delta, PromptSummary};
use crate::error::ApiError;
use crate::generation::{submit, usage_of, ChoiceResult, Submission};
use crate::openai::common::{check_top_logprobs, unix_now, Usage};
use crate::openai::completions::{CompletionRequest, LegacyLogprobs, Prompt};
use crate::sse::{sse_response, ChunkFormatter};
use crate::state::AppState;

/// OpenAI's default for completions.
const DEFAULT_MAX_TOKENS: usize = 16;

/// A prompt as tokenized, with the text `echo` repeats.
struct TokenizedPrompt {
    text: String,
    ids: Vec<u32>,
}

pub async fn completions(
    State(state): State<Arc<AppState>>,
    ApiJson(req): ApiJson<CompletionRequest>,
) -> Result<Response, ApiError> {
    state.check_model(req.model.as_deref())?;
    let logprobs = req
        .logprobs
        .map(|n| check_top_logprobs("logprobs", n))
        .transpose()?;
    let sampling = req.sampling.validate(logprobs)?;
    let prompts = req.prompt.into_prompts();
    if prompts.is_empty() {
        return Err(ApiError::invalid_param("prompt", "the prompt is empty"));
    }
    let mut tokenized = Vec::with_capacity(prompts.len());
    for p in prompts {
        tokenized.push(match p {
            Prompt::Text(text) => {
                let ids = state.tokenizers.encode(text.clone(), true).await?;
                TokenizedPrompt { text, ids }
            }
            Prompt::Ids(ids) => {
                let text = if req.echo && ids.iter().all(|&t| (t as usize) < state.vocab_size) {
                    state.tokenizers.decode(ids.clone(), false).await?
                } else {
                    String::new()
                };
                TokenizedPrompt { text, ids }
            }
        });
    }
    let prompt_logprobs = if req.echo { logprobs } else { None };
    let mut parts = Vec::with_capacity(tokenized.len());
    for p in &tokenized {
        parts.push(submit(
            &state,
            p.ids.clone(),
            &sampling,
            Some(DEFAULT_MAX_TOKENS),
            prompt_logprobs,
        )?);
    }
    let submission = Submission::concat(parts)
        .ok_or_else(|| ApiError::invalid_param("prompt", "the prompt is empty"))?;
    let shape = Shape {
        id: format!("cmpl-{}", state.next_request_id()),
        created: unix_now(),
        model: state.model_name.clone(),
        n: sampling.n,
        echo: req.echo,
        logprobs: logprobs.is_some(),
        return_token_ids: sampling.return_token_ids,
        prompts: tokenized,
    };
    if sampling.stream {
        let formatter = StreamState::new(shape, sampling.include_usage);
        return Ok(sse_response(submission, formatter));
    }
    let results = submission.collect().await?;
    Ok(Json(shape.full_response(&results)).into_response())
}

/// What shapes the answer, shared by the streaming and the complete form.
struct Shape {
    id: String,
    created: u64,
    model: String,
    n: usize,
    echo: bool,
    logprobs: bool,
    return_token_ids: bool,
    prompts: Vec<TokenizedPrompt>,
}

impl Shape {
    fn prompt_of(&self, choice: usize) -> &TokenizedPrompt {
        &self.prompts[(choice / self.n.max(1)).min(self.prompts.len() - 1)]
    }

    /// The echoed prompt: its text, and its tokens' logprobs when asked for.
    fn echo_part(
        &self,
        choice: usize,
        prompt: Option<&PromptSummary>,
        lp: &mut LegacyLogprobs,
    ) -> String {
        if !self.echo {
            return String::new();
        }
        if let Some(entries) = prompt.and_then(|p| p.prompt_logprobs.as_ref()) {
            for (token, entry) in entries {
                lp.push(token, entry.as_ref());
            }
        }
        self.prompt_of(choice).text.clone()
    }

    fn full_response(&self, results: &[ChoiceResult]) -> Value {
        let choices: Vec<Value> = results
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut lp = LegacyLogprobs::starting_at(0);
                let mut text = self.echo_part(i, r.prompt.as_ref(), &mut lp);
                lp.next_offset = text.len();
                for e in &r.logprobs {
                    lp.push(&e.token, Some(e));
                }
                text.push_str(&r.text);
                let mut choice = json!({
                    "index": i,
                    "text": text,
                    "logprobs": if self.logprobs { lp.take() } else { Value::Null },
                    "finish_reason": r.finish.map(|f| f.as_openai()),
                });
                if self.return_token_ids {
                    choice["prompt_token_ids"] = json!(self.prompt_of(i).ids);
                    choice["token_ids"] = json!(r.token_ids);
                }
                choice
            })
            .collect();
        let mut usage = Usage::new(0, 0, 0);
        for (p, group) in results.chunks(self.n.max(1)).enumerate() {
            let refs: Vec<&ChoiceResult> = group.iter().collect();
            let u = usage_of(self.prompts.get(p).map_or(0, |t| t.ids.len()), &refs);
            usage = Usage::new(
                usage.prompt_tokens + u.prompt_tokens,
                usage.completion_tokens + u.completion_tokens,
                usage.prompt_tokens_details.cached_tokens + u.prompt_tokens_details.cached_tokens,
            );
        }
        json!({
            "id": self.id, "object": "text_completion", "created": self.created,
            "model": self.model, "choices": choices, "usage": usage,
        })
    }
}

struct StreamState {
    shape: Shape,
    include_usage: bool,
    logprobs: Vec<LegacyLogprobs>,
    completion_tokens: usize,
    cached_tokens: Vec<usize>,
}

impl StreamState {
    fn new(shape: Shape, include_usage: bool) -> Self {
        let choices = shape.prompts.len() * shape.n;
        Self {
            shape,
            include_usage,
            logprobs: (0..choices).map(|_| LegacyLogprobs::default()).collect(),
            completion_tokens: 0,
            cached_tokens: vec![0; choices],
        }
    }

    fn chunk(&self, choices: Vec<Value>) -> Value {
        crate::sse::chunk_envelope(
            &self.shape.id,
            "text_completion",
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
        let Some(mut lp) = self.logprobs.get_mut(i).map(std::mem::take) else {
            return Vec::new();
        };
        let mut text = String::new();
        if let Some(p) = &delta.prompt {
            self.cached_tokens[i] = p.num_cached_tokens;
            text = self.shape.echo_part(i, Some(p), &mut lp);
            lp.next_offset = text.len();
        }
        for e in &delta.logprobs {
            lp.push(&e.token, Some(e));
        }
        text.push_str(&delta.text);
        let mut choice = json!({
            "index": i,
            "text": text,
            "logprobs": if self.shape.logprobs { lp.take() } else { Value::Null },
            "finish_reason": delta.finish.map(|f| f.as_openai()),
        });
        self.logprobs[i] = lp;
        if self.shape.return_token_ids {
            if delta.prompt.is_some() {
                choice["prompt_token_ids"] = json!(self.shape.prompt_of(i).ids);
            }
            choice["token_ids"] = json!(delta.token_ids);
        }
        vec![self.chunk(vec![choice])]
    }

    fn on_end(&mut self) -> Vec<Value> {
        if !self.include_usage {
            return Vec::new();
        }
        let n = self.shape.n.max(1);
        let prompt_tokens: usize = self.shape.prompts.iter().map(|p| p.ids.len()).sum();
        let cached: usize = self.cached_tokens.iter().step_by(n).sum();
        let mut chunk = self.chunk(Vec::new());
        chunk["usage"] = json!(Usage::new(prompt_tokens, self.completion_tokens, cached));
        vec![chunk]
    }
}
