//! One id per HTTP request, the same everywhere: the client's `X-Request-Id` when it sends a
//! usable one (vLLM's header), else a random one. It is echoed in the response's
//! `X-Request-Id`, is the suffix of a completion's `id` (`chatcmpl-ID`, as vLLM builds it),
//! and names the request's log lines and span. Every response is counted in
//! `ferrite:http_requests_total{route,status}`, and every refused one gets a log line.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

use crate::app::state::AppState;
use crate::error::{ApiError, RejectReason};
use crate::observe::metrics::Metrics;
use crate::observe::request_names::{self, RequestName};

pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The routes the counter names; any other path is `unmatched`, so that a scanner probing
/// paths cannot grow the series without bound.
const ROUTES: &[&str] = &[
    "/v1/completions",
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/models",
    "/tokenize",
    "/detokenize",
    "/health",
    "/metrics",
];

fn route_label(path: &str) -> &'static str {
    if path.starts_with("/v1/models/") {
        // One label for every model id, as the router matches them (`/v1/models/{*id}`).
        return "/v1/models/{id}";
    }
    ROUTES
        .iter()
        .find(|r| **r == path)
        .copied()
        .unwrap_or("unmatched")
}

/// The client's id if it is one we can echo and log as is: 1..=128 visible ASCII characters.
fn client_id(headers: &HeaderMap) -> Option<Arc<str>> {
    let value = headers.get(&X_REQUEST_ID)?.to_str().ok()?;
    usable(value).then(|| Arc::from(value))
}

fn usable(id: &str) -> bool {
    (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_graphic())
}

/// vLLM's `request_id` body field (chat and completions): the request's id from here on, in
/// the answer's id, the log lines, the span and the response header, unless the client sent
/// an `X-Request-Id` header, which wins as in vLLM. One that could not be echoed is a 400.
pub fn adopt_body_request_id(id: Option<&str>) -> Result<(), ApiError> {
    let Some(id) = id else { return Ok(()) };
    if !usable(id) {
        return Err(ApiError::invalid_param(
            "request_id",
            "`request_id` must be 1 to 128 visible ASCII characters (no spaces)",
        ));
    }
    request_names::adopt_body_id(id);
    Ok(())
}

/// 32 random hex digits, as vLLM's uuid4().hex.
fn new_id() -> Arc<str> {
    Arc::from(format!("{:032x}", rand::random::<u128>()))
}

pub async fn request_id(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let header = client_id(request.headers());
    let name = RequestName::new(header.clone().unwrap_or_else(new_id), header.is_some());
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let response = request_names::scope(Arc::clone(&name), next.run(request)).await;
    // The body may have named the request (`adopt_body_request_id`).
    let id = name.get();
    let log = !state.request_log.disabled;
    finish(
        &id,
        method.as_str(),
        &path,
        response,
        Some(&state.metrics),
        log,
    )
}

/// A response made before the router (while loading or draining): the same id, header, count
/// (once the metrics exist) and log line as the router's own.
pub fn outside_router(
    request: &Request,
    response: Response,
    metrics: Option<&Metrics>,
    log: bool,
) -> Response {
    let id = client_id(request.headers()).unwrap_or_else(new_id);
    let path = request.uri().path();
    finish(&id, request.method().as_str(), path, response, metrics, log)
}

fn finish(
    id: &str,
    method: &str,
    path: &str,
    mut response: Response,
    metrics: Option<&Metrics>,
    log: bool,
) -> Response {
    if let Ok(value) = HeaderValue::from_str(id) {
        response.headers_mut().insert(X_REQUEST_ID, value);
    }
    let status = response.status();
    if let Some(metrics) = metrics {
        metrics.observe_http(route_label(path), status.as_u16());
    }
    if (status.is_client_error() || status.is_server_error()) && log {
        // An ApiError says why; other refusals (axum's 405, a body over the limit) by status.
        let reason = response
            .extensions()
            .get::<RejectReason>()
            .map_or_else(|| status.canonical_reason().unwrap_or(""), |r| r.0.as_str());
        log_rejected(id, method, path, status.as_u16(), reason);
    }
    response
}

/// The log target operators filter on, shared with the finished-request lines.
const TARGET: &str = "ferrite_server::request_log";

/// One line for a request the server refused; server errors at warn.
pub fn log_rejected(id: &str, method: &str, endpoint: &str, status: u16, reason: &str) {
    if status >= 500 {
        tracing::warn!(target: TARGET, request_id = id, method, endpoint, status, reason, "request rejected");
    } else {
        tracing::info!(target: TARGET, request_id = id, method, endpoint, status, reason, "request rejected");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_id_is_used_only_when_it_can_be_echoed() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(X_REQUEST_ID, HeaderValue::from_str(v).unwrap());
            client_id(&h)
        };
        assert_eq!(with("abc-123").as_deref(), Some("abc-123"));
        assert_eq!(with("has space"), None);
        assert_eq!(with(&"x".repeat(129)), None);
        assert_eq!(client_id(&HeaderMap::new()), None);
        assert_eq!(new_id().len(), 32);
        assert!(adopt_body_request_id(Some("batch-7")).is_ok());
        assert!(adopt_body_request_id(None).is_ok());
        let e = adopt_body_request_id(Some("has space")).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("request_id"));
        assert_ne!(new_id(), new_id());
    }

    #[test]
    fn unknown_paths_share_one_label() {
        assert_eq!(route_label("/v1/chat/completions"), "/v1/chat/completions");
        assert_eq!(route_label("/wp-admin"), "unmatched");
        // Every model id under one label, as the router matches them.
        assert_eq!(route_label("/v1/models"), "/v1/models");
        assert_eq!(
            route_label("/v1/models/Qwen/Qwen2.5-0.5B"),
            "/v1/models/{id}"
        );
    }
}
