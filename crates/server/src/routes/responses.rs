//! `POST /v1/responses`: OpenAI's Responses API on the chat path ([`start_chat`]). The
//! complete response and the stream come from one [`OutputBuilder`] fed the same deltas; the
//! stream sends its events as they come, the complete response keeps only the items. A
//! stored response (`store`, the default) goes to [`crate::responses::store`] once finished;
//! a `background` one is stored at once and finished by a task of its own, which
//! `POST /v1/responses/{id}/cancel` aborts. `GET` and `DELETE /v1/responses/{id}` read and
//! remove stored ones.
//!
//! Streamed, the shared pump (`event_pump`) sends the events; dropping the [`RunningChoices`]
//! aborts the engine request.

use std::sync::Arc;

use serde_json::{json, Value};

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::event_pump::{json_event, stream_response, EventSource, Outgoing};
use crate::app::response_store::CancelError;
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
    let store = req.store.unwrap_or(true) && state.responses.enabled();
    let prior = match req.previous_response_id.as_deref() {
        Some(id) => stored_conversation(&state, id)?,
        None => Vec::new(),
    };
    if req.background == Some(true) && !state.responses.enabled() {
        return Err(ApiError::invalid_param(
            "background",
            "this server keeps no responses (--responses-store-capacity 0) to poll",
        ));
    }
    let ReadRequest {
        turn,
        mut sampling,
        settings,
        items,
        background,
    } = req.read(&state.sampling_defaults, prior)?;
    let StartedChat { submission, output } = start_chat(&state, turn, &mut sampling).await?;
    let mut response = ResponseObject::in_progress(
        new_id("resp"),
        unix_now(),
        state.model_name.clone(),
        settings,
    );
    response.store = store;
    response.background = background;
    let builder = OutputBuilder::new(&output);
    if background {
        // `read` refused background without store, and above, without a store to keep it.
        let started = start_background(&state, submission, response, builder, items);
        return Ok(Json(started).into_response());
    }
    let keep = store.then(|| (Arc::clone(&state), items));
    if sampling.stream {
        return Ok(sse_response(submission, response, builder, keep));
    }
    let response = complete(submission, response, builder).await?;
    if let Some((state, items)) = keep {
        keep_response(&state, &response, items);
    }
    Ok(Json(response).into_response())
}

/// The conversation a `previous_response_id` continues: 404 when it is not (or no longer)
/// stored, 400 while it is still running.
fn stored_conversation(state: &AppState, id: &str) -> Result<Vec<Value>, ApiError> {
    match state.responses.conversation(id) {
        Some(Ok(items)) => Ok(items),
        Some(Err(_)) => Err(ApiError::invalid_param(
            "previous_response_id",
            format!("Previous response with id '{id}' has not finished yet."),
        )),
        None => Err(ApiError::not_found(
            "previous_response_id",
            format!("Previous response with id '{id}' not found."),
        )),
    }
}

/// Stores a finished response with its conversation, its output appended.
fn keep_response(state: &AppState, response: &ResponseObject, mut items: Vec<Value>) {
    items.extend(output_items(response));
    state
        .responses
        .put(&response.id, as_json(response), items, None);
}

fn as_json(response: &ResponseObject) -> Value {
    serde_json::to_value(response).unwrap_or(Value::Null)
}

/// A response's output as input items (what a client would send back).
fn output_items(response: &ResponseObject) -> Vec<Value> {
    match serde_json::to_value(&response.output) {
        Ok(Value::Array(items)) => items,
        _ => Vec::new(),
    }
}

/// Stores the response as it starts and finishes it in a task of its own; the in-progress
/// object is the answer.
fn start_background(
    state: &Arc<AppState>,
    submission: Submission,
    response: ResponseObject,
    builder: OutputBuilder,
    items: Vec<Value>,
) -> ResponseObject {
    // The task waits until the store holds its entry, so its finish always finds it.
    let (stored, wait) = tokio::sync::oneshot::channel::<()>();
    let task_state = Arc::clone(state);
    let started = response.clone();
    let task = tokio::spawn(async move {
        if wait.await.is_err() {
            return;
        }
        let id = started.id.clone();
        let mut failed = as_json(&started);
        match complete(submission, started, builder).await {
            Ok(done) => {
                let items = output_items(&done);
                task_state.responses.finish(&id, as_json(&done), items);
            }
            Err(e) => {
                tracing::warn!(response = %id, error = %e.message, "background response failed");
                // OpenAI's failed response: status and error, no output.
                failed["status"] = json!("failed");
                failed["error"] = json!({"code": "server_error", "message": e.message});
                task_state.responses.finish(&id, failed, Vec::new());
            }
        }
    });
    let json = as_json(&response);
    state
        .responses
        .put(&response.id, json, items, Some(task.abort_handle()));
    let _ = stored.send(());
    response
}

/// `GET /v1/responses/{id}`: a stored response (in progress while a background one runs).
pub async fn get_response(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    state
        .responses
        .get(&id)
        .map(Json)
        .ok_or_else(|| missing(&id))
}

/// `DELETE /v1/responses/{id}`.
pub async fn delete_response(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    match state.responses.delete(&id) {
        true => Ok(Json(
            json!({"id": id, "object": "response", "deleted": true}),
        )),
        false => Err(missing(&id)),
    }
}

/// `POST /v1/responses/{id}/cancel`: stops a background response that still runs.
pub async fn cancel_response(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    match state.responses.cancel(&id) {
        Ok(response) => Ok(Json(response)),
        Err(CancelError::NotFound) => Err(missing(&id)),
        Err(CancelError::NotRunning) => Err(ApiError::bad_request(format!(
            "Response with id '{id}' is not running in the background: only a running \
             background response can be cancelled."
        ))),
    }
}

fn missing(id: &str) -> ApiError {
    ApiError::not_found("response_id", format!("Response with id '{id}' not found."))
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
    /// Where the finished response is stored, with its conversation (`store`).
    keep: Option<(Arc<AppState>, Vec<Value>)>,
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
        if let Some((state, items)) = self.keep.take() {
            keep_response(&state, &response, items);
        }
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
    keep: Option<(Arc<AppState>, Vec<Value>)>,
) -> Response {
    stream_response(ResponseEvents {
        answer: Some((submission.run(), response, builder)),
        keep,
        opened: false,
        finish: None,
        sequence: Sequencer::default(),
    })
}
