//! A turn's text for `/v1/messages`, and how the turn ended: Anthropic answers *which* of
//! the request's `stop_sequences` stopped it (`stop_sequence`), which the detokenizer matches
//! like any stop string and reports (`Delta::stop_reason`). The matched text is never sent.
//! [`TurnText`] reads a turn for the complete and the streamed answer.

use crate::generation::submission::{RunningChoices, Submission};
use crate::text::messages::{Finish, MatchedStop};

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnEnd {
    Finished(Finish),
    /// One of the request's stop sequences matched (the engine request is then aborted).
    StopSequence(String),
}

/// The turn's generated text as it comes, cut at the request's stop sequences (submitted as
/// its stop strings); dropping it aborts the engine request if it is still running.
pub struct TurnText {
    running: RunningChoices,
}

impl TurnText {
    pub fn new(submission: Submission) -> Self {
        Self {
            running: submission.run(),
        }
    }

    /// The next piece of text, and how the turn ended once it has; `None` when the generation
    /// stopped without finishing (it should not: the engine always finishes a request).
    pub async fn next(&mut self) -> Option<(String, Option<TurnEnd>)> {
        let (_, delta) = self.running.next().await?;
        let end = match (delta.stop_reason, delta.finish) {
            (Some(MatchedStop::Text(sequence)), _) => Some(TurnEnd::StopSequence(sequence)),
            // Anthropic's API takes no stop token ids: any other end is the finish itself.
            (_, finish) => finish.map(TurnEnd::Finished),
        };
        Some((delta.text, end))
    }

    /// The tokens generated so far.
    pub fn output_tokens(&self) -> usize {
        self.running.usage().completion_tokens
    }
}
