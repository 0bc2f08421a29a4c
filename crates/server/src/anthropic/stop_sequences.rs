//! `stop_sequences`, matched on the HTTP side rather than in the detokenizer because Anthropic
//! answers *which* sequence stopped the turn (`stop_sequence`), which the detokenizer's
//! [`StopMatcher`] does not say. The matched text is never sent, as with OpenAI's `stop`.
//! [`TurnText`] reads a turn's text through them, for the complete and the streamed answer.

use crate::detokenizer::Finish;
use crate::generation::{RunningChoices, Submission};
use crate::stop_strings::{StopCheck, StopMatcher};

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnEnd {
    Finished(Finish),
    /// One of the request's stop sequences matched (the engine request is then aborted).
    StopSequence(String),
}

#[derive(Debug, Clone)]
pub struct StopSequences {
    sequences: Vec<String>,
    matcher: StopMatcher,
    /// Text pushed but not yet released (a possible start of a sequence).
    pending: String,
}

impl StopSequences {
    pub fn new(sequences: Vec<String>) -> Self {
        let sequences: Vec<String> = sequences.into_iter().filter(|s| !s.is_empty()).collect();
        Self {
            matcher: StopMatcher::new(sequences.clone()),
            sequences,
            pending: String::new(),
        }
    }

    /// The text safe to send, and the sequence that matched if one did (nothing after it is
    /// sent).
    pub fn push(&mut self, text: &str) -> (String, Option<String>) {
        self.pending.push_str(text);
        match self.matcher.push(text) {
            StopCheck::Continue(out) => {
                self.pending.drain(..out.len());
                (out, None)
            }
            StopCheck::Stopped(before) => {
                // The matcher stops at the earliest match; the sequence is the one that starts
                // right after the text it released (the first listed, when several do).
                let rest = &self.pending[before.len()..];
                let matched = self
                    .sequences
                    .iter()
                    .find(|s| rest.starts_with(s.as_str()))
                    .cloned();
                self.pending.clear();
                (before, matched)
            }
        }
    }

    /// The turn ended for another reason: what was held back is plain text after all.
    pub fn flush(&mut self) -> String {
        self.pending.clear();
        self.matcher.flush()
    }
}

/// The turn's generated text as it comes, cut at the request's stop sequences; dropping it
/// aborts the engine request if it is still running.
pub struct TurnText {
    running: RunningChoices,
    stops: StopSequences,
}

impl TurnText {
    pub fn new(submission: Submission, stop_sequences: Vec<String>) -> Self {
        Self {
            running: submission.run(),
            stops: StopSequences::new(stop_sequences),
        }
    }

    /// The next piece of text, and how the turn ended once it has; `None` when the generation
    /// stopped without finishing (it should not: the engine always finishes a request).
    pub async fn next(&mut self) -> Option<(String, Option<TurnEnd>)> {
        let (_, delta) = self.running.next().await?;
        let (mut text, matched) = self.stops.push(&delta.text);
        if let Some(sequence) = matched {
            return Some((text, Some(TurnEnd::StopSequence(sequence))));
        }
        let end = delta.finish.map(|finish| {
            text.push_str(&self.stops.flush());
            TurnEnd::Finished(finish)
        });
        Some((text, end))
    }

    /// The tokens generated so far.
    pub fn output_tokens(&self) -> usize {
        self.running.usage().completion_tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_matching_sequence_is_named_across_pieces_and_never_sent() {
        let mut stops = StopSequences::new(vec!["END".into(), "".into(), "\n\n".into()]);
        assert_eq!(stops.push("one E"), ("one ".to_string(), None));
        assert_eq!(stops.push("N"), (String::new(), None));
        assert_eq!(
            stops.push("D and more"),
            (String::new(), Some("END".to_string()))
        );
        let mut stops = StopSequences::new(vec!["END".into(), "\n\n".into()]);
        assert_eq!(
            stops.push("a\n\nEND"),
            ("a".to_string(), Some("\n\n".to_string()))
        );
    }

    #[test]
    fn held_text_comes_out_when_the_turn_ends_otherwise() {
        let mut stops = StopSequences::new(vec!["END".into()]);
        assert_eq!(stops.push("the EN"), ("the ".to_string(), None));
        assert_eq!(stops.flush(), "EN");
        let mut none = StopSequences::new(Vec::new());
        assert_eq!(none.push("x"), ("x".to_string(), None));
        assert_eq!(none.flush(), "");
    }
}
