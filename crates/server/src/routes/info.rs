//! The small endpoints: `/health`, `/v1/models` (and `/v1/models/{id}`), `/metrics`,
//! `/tokenize`, `/detokenize`.

use std::sync::Arc;

use crate::app::state::AppState;
use crate::error::ApiError;
use crate::json_body::JsonBody;
use crate::openai::chat::{prompt_ending, request_template, template_inputs};
use crate::openai::legacy_functions::modernize_messages;
use crate::openai::models::{ModelCard, ModelList};
use crate::openai::tokenize::{
    DetokenizeRequest, DetokenizeResponse, TokenizeRequest, TokenizeResponse,
};
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;

pub async fn health() -> &'static str {
    "ok"
}

pub async fn models(State(state): State<Arc<AppState>>) -> Json<ModelList> {
    Json(ModelList::new(vec![ModelCard::new(
        state.model_name.clone(),
        state.started,
        state.engine.max_model_len(),
    )]))
}

/// `GET /v1/models/{id}`: the served model's card; any other id is OpenAI's 404. The id may
/// hold slashes (`Qwen/Qwen2.5-0.5B`), so the route takes the rest of the path.
pub async fn model(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<ModelCard>, ApiError> {
    if id != state.model_name {
        return Err(ApiError::model_not_found(&id));
    }
    Ok(Json(ModelCard::new(
        state.model_name.clone(),
        state.started,
        state.engine.max_model_len(),
    )))
}

pub async fn metrics(State(state): State<Arc<AppState>>) -> Result<impl IntoResponse, ApiError> {
    let text = state
        .metrics
        .render()
        .map_err(|_| ApiError::internal("cannot render the metrics"))?;
    Ok((
        [(header::CONTENT_TYPE, crate::observe::metrics::CONTENT_TYPE)],
        text,
    ))
}

pub async fn tokenize(
    State(state): State<Arc<AppState>>,
    JsonBody(req): JsonBody<TokenizeRequest>,
) -> Result<Json<TokenizeResponse>, ApiError> {
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
            continue_final_message,
            add_special_tokens,
            tools,
            mut chat_template_kwargs,
            chat_template,
            documents,
        } => {
            state.check_model(model.as_deref())?;
            let own_template = request_template(
                state.trust_request_chat_template,
                chat_template,
                documents,
                &mut chat_template_kwargs,
            )?;
            let (add_generation_prompt, continue_final_message) =
                prompt_ending(add_generation_prompt, continue_final_message)?;
            let mut messages = messages;
            modernize_messages(&mut messages);
            let mut inputs = template_inputs(
                messages,
                add_generation_prompt,
                tools.as_deref(),
                chat_template_kwargs,
            )?;
            inputs.continue_final_message = continue_final_message;
            inputs.add_special_tokens = add_special_tokens.unwrap_or(false);
            inputs.template = own_template;
            state.tokenizers.render_chat_inputs(inputs).await?.ids
        }
    };
    Ok(Json(TokenizeResponse {
        count: tokens.len(),
        max_model_len: state.engine.max_model_len(),
        tokens,
    }))
}

pub async fn detokenize(
    State(state): State<Arc<AppState>>,
    JsonBody(req): JsonBody<DetokenizeRequest>,
) -> Result<Json<DetokenizeResponse>, ApiError> {
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
    Ok(Json(DetokenizeResponse { prompt }))
}
