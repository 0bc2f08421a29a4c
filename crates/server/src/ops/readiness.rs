//! `/health` (liveness) and `/ready` (readiness), answered from the [`Lifecycle`] alone so
//! that they work while the model loads and while the server drains.
//!
//! - `/health`: 200 once the model is loaded, also while draining; 503 while loading (a
//!   Kubernetes startupProbe waits for it). `/health?ready` (any value) answers as `/ready`.
//! - `/ready`: 200 when the server takes requests; 503 while loading, while draining, and
//!   (with `--unready-on-scale-out`) while the scale-out signal is on. The body says why.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

use crate::ops::lifecycle::Lifecycle;

/// `/ready`'s body.
#[derive(Debug, Serialize)]
pub struct Readiness {
    pub ready: bool,
    /// `loading`, `ready` or `draining`.
    pub phase: &'static str,
    /// Why not ready: `loading`, `draining` or `scale_out`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    pub scale_out: ScaleOutState,
    /// API requests whose handler runs now.
    pub in_flight: usize,
}

#[derive(Debug, Serialize)]
pub struct ScaleOutState {
    pub needed: bool,
    pub waiting_queue_growth: bool,
    pub preemptions: bool,
}

pub async fn health(
    State(lifecycle): State<Arc<Lifecycle>>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    if query.contains_key("ready") {
        return ready(State(lifecycle)).await;
    }
    if lifecycle.is_live() {
        "ok".into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "loading").into_response()
    }
}

pub async fn ready(State(lifecycle): State<Arc<Lifecycle>>) -> Response {
    let reason = lifecycle.not_ready_reason();
    let signal = lifecycle.scale_out();
    let body = Readiness {
        ready: reason.is_none(),
        phase: lifecycle.phase().name(),
        reason,
        scale_out: ScaleOutState {
            needed: signal.is_some_and(|s| s.needed()),
            waiting_queue_growth: signal.is_some_and(|s| s.waiting_queue_growth()),
            preemptions: signal.is_some_and(|s| s.preemptions()),
        },
        in_flight: lifecycle.in_flight(),
    };
    let status = if body.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}
