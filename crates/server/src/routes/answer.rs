//! How a generation endpoint answers, the skeleton shared by chat and completions: a complete
//! JSON answer once every choice finished, or a stream of server-sent events, one `data:` line
//! per chunk, the usage chunk when asked for, then `data: [DONE]`. An endpoint supplies only an
//! [`AnswerShape`]: its complete answer, and a [`ChunkFormatter`] that turns a choice's delta
//! into that endpoint's chunk choices.
//!
//! A task forwards the chunks to the response body. When the client disconnects the body is
//! dropped, the task notices (`closed()`) even while no token is coming, and dropping the
//! [`RunningChoices`] aborts the unfinished requests in the engine.

use std::convert::Infallible;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::stream;
use serde::Serialize;
use tokio::sync::mpsc;

use crate::detokenizer::Delta;
use crate::error::ApiError;
use crate::generation::{ChoiceResult, RunningChoices, Submission};
use crate::openai::chunk::{ChunkChoice, StreamChunk};
use crate::openai::response::ResponseMeta;
use crate::openai::sampling::ValidatedSampling;
use crate::openai::usage::Usage;

/// What an endpoint's answer looks like, complete and streamed.
pub trait AnswerShape {
    type Complete: Serialize;
    type Chunks: ChunkFormatter;
    fn complete(
        self,
        meta: ResponseMeta,
        results: Vec<ChoiceResult>,
        usage: Usage,
    ) -> Self::Complete;
    fn into_chunks(self, num_choices: usize) -> Self::Chunks;
}

/// Answers `submission` the way the request asked: streamed or complete.
pub async fn respond(
    submission: Submission,
    meta: ResponseMeta,
    sampling: &ValidatedSampling,
    shape: impl AnswerShape,
) -> Result<Response, ApiError> {
    if sampling.stream {
        let chunks = shape.into_chunks(submission.num_choices());
        return Ok(sse_response(
            submission,
            meta,
            sampling.include_usage,
            chunks,
        ));
    }
    let (results, usage) = submission.collect().await?;
    Ok(Json(shape.complete(meta, results, usage)).into_response())
}

/// What differs between the endpoints' streams: the chunks a choice's delta becomes.
pub trait ChunkFormatter: Send + 'static {
    type Choice: ChunkChoice + Send;
    fn on_delta(&mut self, choice: usize, delta: Delta) -> Vec<ChunkPart<Self::Choice>>;
}

/// One chunk's worth of one choice.
pub struct ChunkPart<C> {
    pub choice: C,
    /// Chat's `return_token_ids`: the prompt, carried by the chunk itself.
    pub prompt_token_ids: Option<Vec<u32>>,
}

impl<C> ChunkPart<C> {
    pub fn new(choice: C) -> Self {
        Self {
            choice,
            prompt_token_ids: None,
        }
    }
}

/// Streams the answer to `submission`; `include_usage` is `stream_options.include_usage`.
fn sse_response<F: ChunkFormatter>(
    submission: Submission,
    meta: ResponseMeta,
    include_usage: bool,
    formatter: F,
) -> Response {
    let (tx, rx) = mpsc::channel::<Event>(64);
    tokio::spawn(forward(
        submission.run(),
        meta,
        include_usage,
        formatter,
        tx,
    ));
    let body = stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Sse::new(body)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// Runs until every choice finished or the client went away.
async fn forward<F: ChunkFormatter>(
    mut choices: RunningChoices,
    meta: ResponseMeta,
    include_usage: bool,
    mut formatter: F,
    tx: mpsc::Sender<Event>,
) {
    loop {
        let next = tokio::select! {
            _ = tx.closed() => return,
            next = choices.next() => next,
        };
        let Some((i, delta)) = next else { break };
        for part in formatter.on_delta(i, delta) {
            let chunk =
                StreamChunk::with_choice(&meta, part.choice, include_usage, part.prompt_token_ids);
            if !send(&tx, chunk).await {
                return;
            }
        }
    }
    if include_usage {
        let chunk = StreamChunk::<F::Choice>::usage(&meta, choices.usage());
        if !send(&tx, chunk).await {
            return;
        }
    }
    let _ = tx.send(Event::default().data("[DONE]")).await;
}

/// Whether the chunk went out (false: the client is gone, or it could not be serialized).
async fn send(tx: &mpsc::Sender<Event>, chunk: impl Serialize) -> bool {
    let event = match Event::default().json_data(&chunk) {
        Ok(event) => event,
        Err(e) => {
            tracing::error!("cannot serialize a stream chunk: {e}");
            return false;
        }
    };
    tx.send(event).await.is_ok()
}
