//! Sending the requests through the router, in-process, a bounded number at a time.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Method, Request};
use axum::Router;
use serde_json::Value;
use tokio::sync::mpsc::Receiver;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tower::ServiceExt;

use super::input::{BatchRequest, Item};
use super::output::{OutputLine, ResultSink};

/// Runs every item `items` yields, at most `max_concurrency` requests in flight, writing each
/// result as it comes. Returns once all are written, or at the first failed write.
pub async fn run_all(
    router: Router,
    mut items: Receiver<Item>,
    sink: Arc<ResultSink>,
    max_concurrency: usize,
) -> anyhow::Result<()> {
    let slots = Arc::new(Semaphore::new(max_concurrency));
    let mut tasks = JoinSet::new();
    while let Some(item) = items.recv().await {
        match item {
            Item::Skip => sink.skip(),
            Item::Refuse(refusal) => sink.write(&OutputLine::refused(refusal))?,
            Item::Send(request) => {
                let slot = Arc::clone(&slots).acquire_owned().await?;
                let (router, sink) = (router.clone(), Arc::clone(&sink));
                tasks.spawn(async move {
                    let line = send(router, request).await;
                    drop(slot);
                    sink.write(&line)
                });
            }
        }
        while let Some(finished) = tasks.try_join_next() {
            finished??;
        }
    }
    while let Some(finished) = tasks.join_next().await {
        finished??;
    }
    Ok(())
}

/// One request through the router, as `ferrite serve` would answer it over HTTP.
async fn send(router: Router, request: BatchRequest) -> OutputLine {
    let http = Request::builder()
        .method(Method::POST)
        .uri(&request.url)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(request.body));
    let http = match http {
        Ok(http) => http,
        // The url was checked when the line was read.
        Err(e) => return internal_error(request.custom_id, format!("bad request url: {e}")),
    };
    let response = match router.oneshot(http).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    let status = response.status().as_u16();
    match axum::body::to_bytes(response.into_body(), usize::MAX).await {
        Ok(bytes) => OutputLine::answered(request.custom_id, status, body_value(&bytes)),
        Err(e) => internal_error(request.custom_id, format!("reading the answer failed: {e}")),
    }
}

/// The answer as JSON; the rare non-JSON answer (axum's own 405, say) as its text.
fn body_value(bytes: &[u8]) -> Value {
    if bytes.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

fn internal_error(custom_id: String, message: String) -> OutputLine {
    let body = serde_json::to_value(ferrite_server::ApiError::internal(message).body())
        .unwrap_or(Value::Null);
    OutputLine::answered(custom_id, 500, body)
}
