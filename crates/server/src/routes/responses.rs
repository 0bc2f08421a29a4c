//! `POST /v1/responses`: OpenAI's Responses API, stateless, on the chat path
//! ([`start_chat`]). The complete response and the stream come from one
//! [`OutputBuilder`] fed the same deltas; the stream sends its events as they come, the
//! complete response keeps only the items.
//!
//! Streamed, a task forwards the events to the response body; when the client disconnects the
//! body is dropped, the task notices (`closed()`) even while no token is coming, and dropping
//! the [`RunningChoices`] aborts the engine request.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::stream;
use tokio::sync::mpsc;

use crate::chat_turn::{start_chat, StartedChat};
use crate::detokenizer::Finish;
use crate::error::ApiError;
use crate::generation::{RunningChoices, Submission};
use crate::json_body::JsonBody;
use crate::openai::response::unix_now;
use crate::responses::builder::OutputBuilder;
use crate::responses::events::{EventBody, Sequencer};
use crate::responses::new_id;
use crate::responses::object::{ResponseObject, ResponseUsage};
use crate::responses::request::{ReadRequest, ResponsesRequest};
use crate::state::AppState;

pub async fn create_response(
    State(state): State<Arc<AppState>>,
    JsonBody(req): JsonBody<ResponsesRequest>,
) -> Result<Response, ApiError> {
    state.check_model(req.model.as_deref())?;
    let ReadRequest {
        turn,
        mut sampling,
        settings,
    } = req.read(&state.sampling_defaults)?;
    let StartedChat { submission, output } = start_chat(&state, turn, &mut sampling).await?;
    let response = ResponseObject::in_progress(
        new_id("resp"),
        unix_now(),
        state.model_name.clone(),
        settings,
    );
    let builder = OutputBuilder::new(&output);
    if sampling.stream {
        return Ok(sse_response(submission, response, builder));
    }
    let response = complete(submission, response, builder).await?;
    Ok(Json(response).into_response())
}

/// Waits for the whole answer.
async fn complete(
    submission: Submission,
    response: ResponseObject,
    mut builder: OutputBuilder,
) -> Result<ResponseObject, ApiError> {
    let mut choices = submission.run();
    let mut finish = None;
    while let Some((_, delta)) = choices.next().await {
        builder.feed(&delta.text, delta.token_ids.len());
        finish = delta.finish.or(finish);
    }
    let finish =
        finish.ok_or_else(|| ApiError::internal("a generation ended without finishing"))?;
    let (response, _) = finished(response, builder, &choices, finish);
    Ok(response)
}

/// The response once its answer ended, and the builder's last events.
fn finished(
    mut response: ResponseObject,
    mut builder: OutputBuilder,
    choices: &RunningChoices,
    finish: Finish,
) -> (ResponseObject, Vec<EventBody>) {
    let cut_short = finish == Finish::Length;
    let events = builder.finish(cut_short);
    let (items, reasoning_tokens) = builder.into_output();
    let usage = ResponseUsage::new(choices.usage(), reasoning_tokens);
    response.finish(items, usage, cut_short);
    (response, events)
}

fn sse_response(
    submission: Submission,
    response: ResponseObject,
    builder: OutputBuilder,
) -> Response {
    let (tx, rx) = mpsc::channel::<Event>(64);
    tokio::spawn(forward(submission.run(), response, builder, tx));
    let body = stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Sse::new(body)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// Sends the events in order, numbered; false once the client is gone.
struct EventSender {
    tx: mpsc::Sender<Event>,
    sequence: Sequencer,
}

impl EventSender {
    async fn send(&mut self, body: EventBody) -> bool {
        let name = body.name();
        let event = match Event::default()
            .event(name)
            .json_data(self.sequence.stamp(body))
        {
            Ok(event) => event,
            Err(e) => {
                tracing::error!("cannot serialize a {name} event: {e}");
                return false;
            }
        };
        self.tx.send(event).await.is_ok()
    }

    async fn send_all(&mut self, bodies: Vec<EventBody>) -> bool {
        for body in bodies {
            if !self.send(body).await {
                return false;
            }
        }
        true
    }
}

/// Runs until the answer ended or the client went away.
async fn forward(
    mut choices: RunningChoices,
    response: ResponseObject,
    mut builder: OutputBuilder,
    tx: mpsc::Sender<Event>,
) {
    let mut out = EventSender {
        tx,
        sequence: Sequencer::default(),
    };
    let opening = vec![
        EventBody::Created {
            response: Box::new(response.clone()),
        },
        EventBody::InProgress {
            response: Box::new(response.clone()),
        },
    ];
    if !out.send_all(opening).await {
        return;
    }
    let mut finish = None;
    loop {
        let next = tokio::select! {
            _ = out.tx.closed() => return,
            next = choices.next() => next,
        };
        let Some((_, delta)) = next else { break };
        finish = delta.finish.or(finish);
        if !out
            .send_all(builder.feed(&delta.text, delta.token_ids.len()))
            .await
        {
            return;
        }
    }
    let Some(finish) = finish else {
        tracing::error!("a streamed response's generation ended without finishing");
        return;
    };
    let (response, mut events) = finished(response, builder, &choices, finish);
    let response = Box::new(response);
    events.push(match finish {
        Finish::Length => EventBody::Incomplete { response },
        _ => EventBody::Completed { response },
    });
    out.send_all(events).await;
}
