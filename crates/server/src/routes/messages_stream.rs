//! The streamed `/v1/messages` answer: Anthropic's server-sent events, `event: <name>` and the
//! event as JSON. A task forwards them to the response body; when the client disconnects the
//! body is dropped, the task notices (`closed()`) even while no token is coming, and dropping
//! the [`TurnText`] aborts the engine request.

use std::convert::Infallible;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream;
use tokio::sync::mpsc;

use crate::anthropic::blocks::BlockBuilder;
use crate::anthropic::error::ErrorInfo;
use crate::anthropic::response::{Message, StopReason};
use crate::anthropic::stop_sequences::{TurnEnd, TurnText};
use crate::anthropic::stream::{MessageDeltaBody, OutputUsage, StreamEvent};
use crate::assistant_output::{OutputParser, OutputSpec};
use crate::error::ApiError;

pub(super) fn respond(text: TurnText, output: OutputSpec, start: Message) -> Response {
    let (tx, rx) = mpsc::channel::<Event>(64);
    tokio::spawn(forward(text, output, start, tx));
    let body = stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Sse::new(body)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// Runs until the turn ended or the client went away.
async fn forward(mut text: TurnText, output: OutputSpec, start: Message, tx: mpsc::Sender<Event>) {
    if !send(&tx, &StreamEvent::MessageStart { message: start }).await {
        return;
    }
    let mut parser = OutputParser::new(&output);
    let mut blocks = BlockBuilder::default();
    loop {
        let next = tokio::select! {
            _ = tx.closed() => return,
            next = text.next() => next,
        };
        let Some((piece, end)) = next else {
            let error = ApiError::internal("a generation ended without finishing");
            let _ = send(
                &tx,
                &StreamEvent::Error {
                    error: ErrorInfo::of(&error),
                },
            )
            .await;
            return;
        };
        let mut events = Vec::new();
        blocks.on_events(parser.feed(&piece), &mut events);
        if let Some(end) = end {
            blocks.on_events(parser.finish(), &mut events);
            blocks.finish(&mut events);
            // Aborted: the client is gone, nobody reads the rest.
            let Some(stop_reason) = StopReason::of(&end, blocks.called_tools()) else {
                return;
            };
            let output_tokens = text.output_tokens();
            // After a stop sequence the engine request is still running: this aborts it.
            drop(text);
            events.push(StreamEvent::MessageDelta {
                delta: MessageDeltaBody {
                    stop_reason: Some(stop_reason),
                    stop_sequence: match end {
                        TurnEnd::StopSequence(s) => Some(s),
                        TurnEnd::Finished(_) => None,
                    },
                },
                usage: OutputUsage { output_tokens },
            });
            events.push(StreamEvent::MessageStop);
            send_all(&tx, &events).await;
            return;
        }
        if !send_all(&tx, &events).await {
            return;
        }
    }
}

async fn send_all(tx: &mpsc::Sender<Event>, events: &[StreamEvent]) -> bool {
    for event in events {
        if !send(tx, event).await {
            return false;
        }
    }
    true
}

/// Whether the event went out (false: the client is gone, or it could not be serialized).
async fn send(tx: &mpsc::Sender<Event>, event: &StreamEvent) -> bool {
    let sse = match Event::default().event(event.name()).json_data(event) {
        Ok(sse) => sse,
        Err(e) => {
            tracing::error!("cannot serialize a stream event: {e}");
            return false;
        }
    };
    tx.send(sse).await.is_ok()
}
