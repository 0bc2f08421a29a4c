//! `POST /v1/responses`: OpenAI's Responses API, stateless, on the chat path
//! ([`start_chat`]). The complete response and the stream come from one
//! [`OutputBuilder`] fed the same deltas; the stream sends its events as they come, the
//! complete response keeps only the items.
//!
//! Streamed, the shared pump (`event_pump`) sends the events; dropping the [`RunningChoices`]
//! aborts the engine request.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::event_pump::{json_event, stream_response, EventSource, Outgoing};
use crate::app::state::AppState;
use crate::error::ApiError;
use crate::generation::chat_turn::{start_chat, StartedChat};
use crate::generation::submission::{RunningChoices, Submission};
use crate::json_body::JsonBody;
use crate::openai::response::unix_now;
use crate::responses::builder::OutputBuilder;
use crate::responses::events::{EventBody, Sequencer};
use crate::responses::new_id;
use crate::responses::object::{ResponseObject, ResponseUsage};
use crate::responses::request::{ReadRequest, ResponsesRequest};
use crate::text::messages::Finish;

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

/// `response.created`, `response.in_progress`, the output's events as the text arrives,
/// then the last ones and `response.completed` (or `.incomplete`), numbered in order.
struct ResponseEvents {
    /// The engine request, the response and its output; taken when the answer ends.
    answer: Option<(RunningChoices, ResponseObject, OutputBuilder)>,
    opened: bool,
    finish: Option<Finish>,
    sequence: Sequencer,
}

impl ResponseEvents {
    fn stamped(&mut self, bodies: Vec<EventBody>) -> Vec<Outgoing> {
        bodies
            .into_iter()
            .map(|body| {
                let name = body.name();
                json_event(Some(name), &self.sequence.stamp(body))
            })
            .collect()
    }
}

impl EventSource for ResponseEvents {
    async fn next_events(&mut self) -> Option<Vec<Outgoing>> {
        if !self.opened {
            self.opened = true;
            let (_, response, _) = self.answer.as_ref()?;
            let opening = vec![
                EventBody::Created {
                    response: Box::new(response.clone()),
                },
                EventBody::InProgress {
                    response: Box::new(response.clone()),
                },
            ];
            return Some(self.stamped(opening));
        }
        let (choices, _, builder) = self.answer.as_mut()?;
        if let Some((_, delta)) = choices.next().await {
            self.finish = delta.finish.or(self.finish);
            let events = builder.feed(&delta.text, delta.token_ids.len());
            return Some(self.stamped(events));
        }
        let (choices, response, builder) = self.answer.take()?;
        let Some(finish) = self.finish else {
            tracing::error!("a streamed response's generation ended without finishing");
            return None;
        };
        let (response, mut events) = finished(response, builder, &choices, finish);
        let response = Box::new(response);
        events.push(match finish {
            Finish::Length => EventBody::Incomplete { response },
            _ => EventBody::Completed { response },
        });
        Some(self.stamped(events))
    }
}

fn sse_response(
    submission: Submission,
    response: ResponseObject,
    builder: OutputBuilder,
) -> Response {
    stream_response(ResponseEvents {
        answer: Some((submission.run(), response, builder)),
        opened: false,
        finish: None,
        sequence: Sequencer::default(),
    })
}
