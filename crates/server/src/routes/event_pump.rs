//! The one server-sent-event pump every streaming route uses. An API supplies an
//! [`EventSource`]: the events to send next, in its own wire format, until it has none. The
//! pump runs the source on a task and forwards its events to the response body; when the client
//! disconnects the body is dropped, the task notices (`closed()`) even while no token is
//! coming, and dropping the source aborts the engine requests it holds.

use std::convert::Infallible;
use std::future::Future;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream;
use serde::Serialize;
use tokio::sync::mpsc;

/// An event ready to send, or why it could not be made.
pub type Outgoing = Result<Event, axum::Error>;

/// One API's stream: what to send next.
pub trait EventSource: Send + 'static {
    /// The next events to send, in order; `None` when the stream is over.
    fn next_events(&mut self) -> impl Future<Output = Option<Vec<Outgoing>>> + Send;

    /// What goes out when nothing did for a while (15 s): an empty comment line unless the
    /// API has an event for it (Anthropic's `ping`).
    fn keep_alive(&self) -> KeepAlive {
        KeepAlive::default()
    }
}

/// An event of `body` as JSON, named `name` (`event: name`) where the API names its events.
pub fn json_event(name: Option<&str>, body: &impl Serialize) -> Outgoing {
    let event = Event::default();
    match name {
        Some(name) => event.event(name),
        None => event,
    }
    .json_data(body)
}

/// The streamed response of `source`.
pub fn stream_response(source: impl EventSource) -> Response {
    let (tx, rx) = mpsc::channel::<Event>(64);
    let keep_alive = source.keep_alive();
    tokio::spawn(pump(source, tx));
    let body = stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Sse::new(body).keep_alive(keep_alive).into_response()
}

/// Runs until the source has nothing more or the client went away; an event that cannot be
/// serialized ends the stream there (logged).
async fn pump(mut source: impl EventSource, tx: mpsc::Sender<Event>) {
    loop {
        let next = tokio::select! {
            _ = tx.closed() => return,
            next = source.next_events() => next,
        };
        let Some(events) = next else { return };
        for event in events {
            let event = match event {
                Ok(event) => event,
                Err(e) => {
                    tracing::error!("cannot serialize a stream event: {e}");
                    return;
                }
            };
            if tx.send(event).await.is_err() {
                return;
            }
        }
    }
}
