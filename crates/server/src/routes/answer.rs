//! How a generation endpoint answers, the skeleton shared by chat and completions: a complete
//! JSON answer once every choice finished, or a stream of server-sent events, one `data:` line
//! per chunk, the usage chunk when asked for, then `data: [DONE]`. An endpoint supplies only an
//! [`AnswerShape`]: its complete answer, and a [`ChunkFormatter`] that turns a choice's delta
//! into that endpoint's chunk choices.
//!
//! The shared pump (`event_pump`) sends the chunks; dropping the [`RunningChoices`] aborts the
//! unfinished requests in the engine.

use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

use super::event_pump::{json_event, stream_response, EventSource, Outgoing};
use crate::error::ApiError;
use crate::generation::submission::{ChoiceResult, RunningChoices, Submission};
use crate::openai::chunk::{ChunkChoice, StreamChunk};
use crate::openai::response::ResponseMeta;
use crate::openai::sampling::ValidatedSampling;
use crate::openai::usage::Usage;
use crate::text::messages::Delta;

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
    stream_response(Chunks {
        choices: submission.run(),
        meta,
        include_usage,
        formatter,
        done: false,
    })
}

/// Each choice's chunks as its deltas arrive, then the usage chunk when asked for and
/// `[DONE]`.
struct Chunks<F> {
    choices: RunningChoices,
    meta: ResponseMeta,
    include_usage: bool,
    formatter: F,
    done: bool,
}

impl<F: ChunkFormatter> EventSource for Chunks<F> {
    async fn next_events(&mut self) -> Option<Vec<Outgoing>> {
        if self.done {
            return None;
        }
        if let Some((i, delta)) = self.choices.next().await {
            let chunks = self.formatter.on_delta(i, delta).into_iter().map(|part| {
                let chunk = StreamChunk::with_choice(
                    &self.meta,
                    part.choice,
                    self.include_usage,
                    part.prompt_token_ids,
                );
                json_event(None, &chunk)
            });
            return Some(chunks.collect());
        }
        self.done = true;
        let mut events = Vec::new();
        if self.include_usage {
            let usage = StreamChunk::<F::Choice>::usage(&self.meta, self.choices.usage());
            events.push(json_event(None, &usage));
        }
        events.push(Ok(Event::default().data("[DONE]")));
        Some(events)
    }
}
