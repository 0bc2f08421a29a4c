//! The small endpoints: `/health`, `/v1/models`, `/metrics`, `/tokenize`, `/detokenize`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api_json::ApiJson;
use crate::error::ApiError;
use crate::openai::chat::ChatMessage;
use crate::state::AppState;

pub async fn health() -> &'static str {
    "ok"
}

pub async fn models(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({
        "object": "list",
        "data": [{
            "id": state.model_name,
            "object": "model",
            "created": state.started,
            "owned_by": "ferrite",
            "max_model_len": state.engine.max_model_len(),
        }],
    }))
}

pub async fn metrics(State(state): State<Arc<AppState>>) -> Result<impl IntoResponse, ApiError> {
    let text = state
        .metrics
        .render()
        .map_err(|_| ApiError::internal("cannot render the metrics"))?;
    Ok(([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text))
}

/// vLLM's two shapes: a completion prompt, or chat messages.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum TokenizeRequest {
    Chat {
        model: Option<String>,
        messages: Vec<ChatMessage>,
        add_generation_prompt: Option<bool>,
    },
    Prompt {
        model: Option<String>,
        prompt: String,
        add_special_tokens: Option<bool>,
    },
}

pub async fn tokenize(
    State(state): State<Arc<AppState>>,
    ApiJson(req): ApiJson<TokenizeRequest>,
) -> Result<Json<Value>, ApiError> {
    let tokens = match req {
        TokenizeRequest::Prompt {
            model,
            prompt,
            add_special_tokens,
        } => {
            state.check_model(model.as_deref())?;
            state
                .tokenizers
                .encode(prompt, add_special_tokens.unwrap_or(true))
                .await?
        }
        TokenizeRequest::Chat {
            model,
            messages,
            add_generation_prompt,
        } => {
            state.check_model(model.as_deref())?;
            let messages = messages
                .into_iter()
                .map(ChatMessage::into_template_value)
                .collect::<Result<Vec<_>, _>>()?;
            state
                .tokenizers
                .render_chat(messages, add_generation_prompt.unwrap_or(true))
                .await?
                .ids
        }
    };
    Ok(Json(json!({
        "count": tokens.len(),
        "max_model_len": state.engine.max_model_len(),
        "tokens": tokens,
    })))
}

#[derive(Debug, Deserialize)]
pub struct DetokenizeRequest {
    pub model: Option<String>,
    pub tokens: Vec<u32>,
}

pub async fn detokenize(
    State(state): State<Arc<AppState>>,
    ApiJson(req): ApiJson<DetokenizeRequest>,
) -> Result<Json<Value>, ApiError> {
    state.check_model(req.model.as_deref())?;
    if let Some(bad) = req.tokens.iter().find(|&&t| t as usize >= state.vocab_size) {
        return Err(ApiError::invalid_param(
            "tokens",
            format!(
                "token id {bad} is out of range (vocabulary size {})",
                state.vocab_size
            ),
        ));
    }
    let prompt = state.tokenizers.decode(req.tokens, false).await?;
    Ok(Json(json!({ "prompt": prompt })))
}
