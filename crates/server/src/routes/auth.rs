//! `--api-key`: `Authorization: Bearer <key>` on the API routes (not on /health or /metrics,
//! which load balancers and scrapers poll without credentials); Anthropic's Messages routes
//! also take Anthropic's `x-api-key: <key>` (what the `anthropic` clients send) and answer a
//! refusal in Anthropic's error shape.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::anthropic::error::AnthropicError;
use crate::app::state::AppState;
use crate::error::ApiError;

pub async fn require_api_key(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    let Some(key) = &state.api_key else {
        return next.run(req).await;
    };
    let anthropic = req.uri().path().starts_with("/v1/messages");
    let accepted = presented_key(&req, anthropic)
        .is_some_and(|p| constant_time_eq(p.as_bytes(), key.as_bytes()));
    if accepted {
        next.run(req).await
    } else if anthropic {
        AnthropicError(ApiError::unauthorized()).into_response()
    } else {
        ApiError::unauthorized().into_response()
    }
}

/// The key a request presents: `Authorization: Bearer`, or `x-api-key` where allowed.
fn presented_key(req: &Request, x_api_key: bool) -> Option<&str> {
    let header = |name| req.headers().get(name).and_then(|v| v.to_str().ok());
    header(header::AUTHORIZATION)
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| header(header::HeaderName::from_static("x-api-key")).filter(|_| x_api_key))
        .map(str::trim)
}

/// Comparison time independent of where the first difference is, so the key cannot be guessed
/// byte by byte from response times.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::{constant_time_eq, presented_key};
    use axum::body::Body;
    use axum::extract::Request;

    #[test]
    fn x_api_key_counts_only_where_allowed() {
        let req = |name: &str, value: &str| {
            Request::builder()
                .header(name, value)
                .body(Body::empty())
                .unwrap()
        };
        let bearer = req("authorization", "Bearer k1 ");
        assert_eq!(presented_key(&bearer, false), Some("k1"));
        let anthropic = req("x-api-key", "k2");
        assert_eq!(presented_key(&anthropic, true), Some("k2"));
        assert_eq!(presented_key(&anthropic, false), None);
    }

    #[test]
    fn equal_only_when_identical() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret!"));
    }
}
