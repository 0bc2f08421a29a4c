//! CORS, as vLLM's flags configure it (`--allowed-origins`, `--allowed-methods`,
//! `--allowed-headers`, `--allow-credentials`) and Starlette's middleware answers: a browser's
//! preflight `OPTIONS` is answered here (before the API key check, which browsers never send
//! on a preflight), and every response to an allowed origin carries the CORS headers.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::app::config::CorsConfig;
use crate::app::state::AppState;

/// Seconds a browser may cache a preflight's answer (Starlette's default).
const MAX_AGE: &str = "600";

impl CorsConfig {
    fn any(list: &[String]) -> bool {
        list.iter().any(|v| v == "*")
    }

    fn allows_origin(&self, origin: &str) -> bool {
        Self::any(&self.origins) || self.origins.iter().any(|o| o == origin)
    }

    /// `*` only when any origin goes and no credentials do (browsers refuse `*` with them).
    fn allow_origin_value(&self, origin: &HeaderValue) -> HeaderValue {
        if Self::any(&self.origins) && !self.credentials {
            HeaderValue::from_static("*")
        } else {
            origin.clone()
        }
    }

    fn add_common(&self, headers: &mut HeaderMap, origin: &HeaderValue) {
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            self.allow_origin_value(origin),
        );
        if self.credentials {
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
        // The answer depends on the origin: caches must not serve it to another.
        headers.append(header::VARY, HeaderValue::from_static("Origin"));
    }

    fn preflight(&self, request: &HeaderMap, origin: &HeaderValue) -> Response {
        let origin_ok = origin.to_str().is_ok_and(|o| self.allows_origin(o));
        let method = request
            .get(header::ACCESS_CONTROL_REQUEST_METHOD)
            .and_then(|m| m.to_str().ok())
            .unwrap_or("");
        let method_ok =
            Self::any(&self.methods) || self.methods.iter().any(|m| m.eq_ignore_ascii_case(method));
        if !origin_ok || !method_ok {
            let what = if origin_ok { "method" } else { "origin" };
            return (StatusCode::BAD_REQUEST, format!("Disallowed CORS {what}")).into_response();
        }
        let mut response = Response::new(Body::from("OK"));
        let headers = response.headers_mut();
        self.add_common(headers, origin);
        let methods = match Self::any(&self.methods) {
            true => "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT".to_string(),
            false => self.methods.join(", "),
        };
        // With `*`, the headers the browser asks for are the answer (`*` is not honoured with
        // credentials).
        let asked = request.get(header::ACCESS_CONTROL_REQUEST_HEADERS).cloned();
        let allowed_headers = match (Self::any(&self.headers), asked) {
            (true, Some(asked)) => Some(asked),
            (true, None) => None,
            (false, _) => HeaderValue::from_str(&self.headers.join(", ")).ok(),
        };
        if let Ok(v) = HeaderValue::from_str(&methods) {
            headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, v);
        }
        if let Some(v) = allowed_headers {
            headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, v);
        }
        headers.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static(MAX_AGE),
        );
        response
    }
}

pub async fn cors(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let Some(cors) = &state.cors else {
        return next.run(request).await;
    };
    // No Origin: not a browser's cross-origin request.
    let Some(origin) = request.headers().get(header::ORIGIN).cloned() else {
        return next.run(request).await;
    };
    let is_preflight = request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    if is_preflight {
        return cors.preflight(request.headers(), &origin);
    }
    let mut response = next.run(request).await;
    if origin.to_str().is_ok_and(|o| cors.allows_origin(o)) {
        let headers = response.headers_mut();
        cors.add_common(headers, &origin);
        // Let the page's script read the id it would quote in a bug report.
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("x-request-id"),
        );
    }
    response
}
