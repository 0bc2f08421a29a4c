//! HTTP handlers, one file per endpoint family.

mod answer;
mod auth;
mod beam_answer;
pub mod chat;
mod chat_stream;
pub mod completions;
pub mod cors;
mod event_pump;
mod infill;
pub mod info;
pub mod messages;
mod messages_stream;
pub mod request_id;
pub mod responses;

use std::sync::Arc;

use axum::http::{StatusCode, Uri};
use axum::middleware;
use axum::routing::{get, post};
use axum::Router;

use crate::app::state::AppState;
use crate::error::ApiError;

pub async fn not_found(uri: Uri) -> ApiError {
    ApiError {
        status: StatusCode::NOT_FOUND,
        message: format!("no route for {}", uri.path()),
        kind: "invalid_request_error",
        param: None,
        code: None,
    }
}

/// Every route of the server, the API ones behind the API key; around them all (outermost
/// first) the request id, then CORS, whose preflight needs no key.
pub fn router(state: Arc<AppState>) -> Router {
    let api = Router::new()
        .route("/v1/completions", post(completions::completions))
        .route("/v1/chat/completions", post(chat::chat_completions))
        .route("/v1/responses", post(responses::create_response))
        .route(
            "/v1/responses/{id}",
            get(responses::get_response).delete(responses::delete_response),
        )
        .route(
            "/v1/responses/{id}/cancel",
            post(responses::cancel_response),
        )
        .route("/v1/messages", post(messages::create_message))
        .route("/v1/messages/count_tokens", post(messages::count_tokens))
        .route("/v1/models", get(info::models))
        .route("/v1/models/{*id}", get(info::model))
        .route("/infill", post(infill::infill))
        .route("/tokenize", post(info::tokenize))
        .route("/detokenize", post(info::detokenize))
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            auth::require_api_key,
        ));
    Router::new()
        .merge(api)
        .route("/health", get(info::health))
        .route("/metrics", get(info::metrics))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            cors::cors,
        ))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            request_id::request_id,
        ))
        .with_state(state)
}
