//! HTTP handlers, one file per endpoint family.

mod answer;
pub mod chat;
mod chat_stream;
pub mod completions;
mod event_pump;
pub mod info;
pub mod messages;
mod messages_stream;
pub mod responses;

use axum::http::{StatusCode, Uri};

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
