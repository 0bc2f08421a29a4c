//! Server-sent events for streaming answers: one `data:` line per chunk, then `data: [DONE]`.
//!
//! A task forwards the choices' deltas to the response body. When the client disconnects the
//! body is dropped, the task notices (`closed()`) even while no token is coming, and its
//! [`AbortGuard`] aborts the unfinished requests in the engine.

use std::convert::Infallible;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::{self, StreamExt};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::detokenizer::Delta;
use crate::generation::Submission;

/// Turns deltas into the endpoint's chunk objects.
pub trait ChunkFormatter: Send + 'static {
    fn on_delta(&mut self, choice: usize, delta: Delta) -> Vec<Value>;
    /// After every choice finished: the usage chunk, when asked for.
    fn on_end(&mut self) -> Vec<Value>;
}

pub fn sse_response(submission: Submission, mut formatter: impl ChunkFormatter) -> Response {
    let (tx, rx) = mpsc::channel::<Event>(64);
    let (mut deltas, mut guard) = submission.into_stream();
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                _ = tx.closed() => return,
                next = deltas.next() => next,
            };
            let Some((i, delta)) = next else { break };
            if delta.finish.is_some() {
                guard.mark_finished(i);
            }
            for chunk in formatter.on_delta(i, delta) {
                if tx
                    .send(Event::default().data(chunk.to_string()))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
        for chunk in formatter.on_end() {
            if tx
                .send(Event::default().data(chunk.to_string()))
                .await
                .is_err()
            {
                return;
            }
        }
        let _ = tx.send(Event::default().data("[DONE]")).await;
    });
    let body = stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Sse::new(body)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// The envelope every streamed chunk shares; `usage` is present (null) on each chunk when the
/// client asked for `stream_options.include_usage`, as OpenAI does.
pub fn chunk_envelope(
    id: &str,
    object: &str,
    created: u64,
    model: &str,
    include_usage: bool,
    choices: Vec<Value>,
) -> Value {
    let mut chunk = serde_json::json!({
        "id": id, "object": object, "created": created, "model": model, "choices": choices,
    });
    if include_usage {
        chunk["usage"] = Value::Null;
    }
    chunk
}
