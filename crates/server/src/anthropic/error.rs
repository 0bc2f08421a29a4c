//! Anthropic's error body, `{"type": "error", "error": {"type", "message"}}`, for the Messages
//! routes: the same [`ApiError`] every route raises, rendered as Anthropic's clients parse it
//! (the `anthropic` SDKs read `error.type` and `error.message`, not OpenAI's `param`).

use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::ApiError;
use crate::json_body::JsonBody;

/// An [`ApiError`] answered in Anthropic's shape.
#[derive(Debug)]
pub struct AnthropicError(pub ApiError);

impl From<ApiError> for AnthropicError {
    fn from(e: ApiError) -> Self {
        Self(e)
    }
}

#[derive(Debug, Serialize)]
pub struct ErrorEnvelope {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub error: ErrorInfo,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorInfo {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub message: String,
}

impl ErrorInfo {
    /// Anthropic's body has no `param`: the message names the field when it does not already.
    pub fn of(e: &ApiError) -> Self {
        let message = match &e.param {
            Some(param) if !e.message.contains(param.as_str()) => {
                format!("{param}: {}", e.message)
            }
            _ => e.message.clone(),
        };
        Self {
            kind: error_type(e.status),
            message,
        }
    }
}

/// Anthropic's error `type` for an HTTP status (their documented table; 503 is this server's
/// full queue, Anthropic's `overloaded_error`).
pub fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        _ => "api_error",
    }
}

impl IntoResponse for AnthropicError {
    fn into_response(self) -> Response {
        let body = ErrorEnvelope {
            kind: "error",
            error: ErrorInfo::of(&self.0),
        };
        (self.0.status, Json(body)).into_response()
    }
}

/// A JSON body whose rejections are Anthropic error bodies.
pub struct AnthropicJson<T>(pub T);

impl<S, T> FromRequest<S> for AnthropicJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = AnthropicError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let JsonBody(value) = JsonBody::from_request(req, state).await?;
        Ok(Self(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_anthropic_error_types() {
        let bad = ApiError::invalid_param("max_tokens", "max_tokens is required");
        assert_eq!(
            ErrorInfo::of(&bad),
            ErrorInfo {
                kind: "invalid_request_error",
                message: "max_tokens is required".into()
            }
        );
        let unnamed = ApiError::invalid_param("messages", "a final assistant message");
        assert_eq!(
            ErrorInfo::of(&unnamed).message,
            "messages: a final assistant message"
        );
        assert_eq!(
            ErrorInfo::of(&ApiError::unauthorized()).kind,
            "authentication_error"
        );
        assert_eq!(
            ErrorInfo::of(&ApiError::model_not_found("x")).kind,
            "not_found_error"
        );
        assert_eq!(
            ErrorInfo::of(&ApiError::overloaded("full")).kind,
            "overloaded_error"
        );
        assert_eq!(ErrorInfo::of(&ApiError::internal("x")).kind, "api_error");
    }
}
