//! vLLM's `prompt_logprobs`: the logprob of every prompt token under the model (the first has
//! none), with the `n` most likely alternatives at each position. Asked for on chat and
//! completions, answered in vLLM's shape: a list with one entry per prompt token, `null` for
//! the first, else an object keyed by token id (the prompt's own token first, then the
//! alternatives) of `{logprob, rank, decoded_token}`. On a completion choice; at the top of a
//! chat completion. Not with `stream` (vLLM refuses them there too).

use serde::ser::{Serialize, SerializeMap, Serializer};

use super::logprobs::MAX_TOP_LOGPROBS;
use crate::error::ApiError;
use crate::text::messages::LogprobEntry;
use crate::text::token_text::TokenText;

/// Reads the field: 0..=20 alternatives (vLLM's default `max_logprobs`, which also refuses
/// its `-1`, the whole vocabulary), and not with `stream`.
pub fn check_prompt_logprobs(value: Option<i64>, stream: bool) -> Result<Option<usize>, ApiError> {
    let Some(n) = value else {
        return Ok(None);
    };
    if !(0..=MAX_TOP_LOGPROBS as i64).contains(&n) {
        return Err(ApiError::invalid_param(
            "prompt_logprobs",
            format!("prompt_logprobs must be between 0 and {MAX_TOP_LOGPROBS}, got {n}"),
        ));
    }
    if stream {
        return Err(ApiError::invalid_param(
            "prompt_logprobs",
            "`prompt_logprobs` are not available when `stream=True`",
        ));
    }
    Ok(Some(n as usize))
}

/// One position's logprob as vLLM writes it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PositionLogprob {
    pub logprob: f32,
    pub rank: u32,
    pub decoded_token: String,
}

/// The answer's `prompt_logprobs`.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptLogprobs(pub Vec<Option<Vec<(u32, PositionLogprob)>>>);

impl PromptLogprobs {
    /// From the prompt's tokens and their entries (`None` for the first), keeping `n`
    /// alternatives of each (the engine may have computed more, for `echo`'s `logprobs`).
    pub fn new(entries: &[(TokenText, Option<LogprobEntry>)], n: usize) -> Self {
        let position = |entry: &LogprobEntry| {
            let own = PositionLogprob {
                logprob: entry.logprob,
                rank: entry.rank,
                decoded_token: entry.token.text.clone(),
            };
            let mut map = vec![(entry.token.id, own)];
            for (i, (token, logprob)) in entry.top.iter().take(n).enumerate() {
                // A key once, where it first comes (the prompt's token is one of the best).
                if map.iter().all(|(id, _)| *id != token.id) {
                    let alternative = PositionLogprob {
                        logprob: *logprob,
                        rank: i as u32 + 1,
                        decoded_token: token.text.clone(),
                    };
                    map.push((token.id, alternative));
                }
            }
            map
        };
        Self(
            entries
                .iter()
                .map(|(_, entry)| entry.as_ref().map(position))
                .collect(),
        )
    }
}

impl Serialize for PromptLogprobs {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|p| p.as_ref().map(Position)))
    }
}

/// One position as a JSON object keyed by token id, in the order built.
struct Position<'a>(&'a Vec<(u32, PositionLogprob)>);

impl Serialize for Position<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (id, logprob) in self.0 {
            map.serialize_entry(&id.to_string(), logprob)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tt(id: u32, text: &str) -> TokenText {
        TokenText {
            id,
            text: text.into(),
            bytes: text.as_bytes().to_vec(),
        }
    }

    #[test]
    fn positions_are_keyed_by_id_with_the_prompt_token_first() {
        let second = LogprobEntry {
            token: tt(7, " b"),
            logprob: -2.0,
            rank: 3,
            top: vec![
                (tt(4, " x"), -0.5),
                (tt(9, " y"), -1.0),
                (tt(7, " b"), -2.0),
            ],
        };
        let third = LogprobEntry {
            token: tt(4, " x"),
            logprob: -0.25,
            rank: 1,
            top: vec![(tt(4, " x"), -0.25), (tt(1, " z"), -3.0)],
        };
        let entries = vec![
            (tt(3, "a"), None),
            (tt(7, " b"), Some(second)),
            (tt(4, " x"), Some(third)),
        ];
        let got = serde_json::to_string(&PromptLogprobs::new(&entries, 2)).unwrap();
        let want = concat!(
            r#"[null,{"7":{"logprob":-2.0,"rank":3,"decoded_token":" b"},"#,
            r#""4":{"logprob":-0.5,"rank":1,"decoded_token":" x"},"#,
            r#""9":{"logprob":-1.0,"rank":2,"decoded_token":" y"}},"#,
            r#"{"4":{"logprob":-0.25,"rank":1,"decoded_token":" x"},"#,
            r#""1":{"logprob":-3.0,"rank":2,"decoded_token":" z"}}]"#
        );
        // Key order is part of the shape: compare the text.
        assert_eq!(got, want);
        let zero = PromptLogprobs::new(&entries, 0);
        assert_eq!(zero.0[1].as_ref().map(Vec::len), Some(1));
    }

    #[test]
    fn the_field_is_0_to_20_and_not_streamed() {
        assert_eq!(check_prompt_logprobs(None, true).unwrap(), None);
        assert_eq!(check_prompt_logprobs(Some(0), false).unwrap(), Some(0));
        assert_eq!(check_prompt_logprobs(Some(20), false).unwrap(), Some(20));
        for (value, stream) in [(Some(-1), false), (Some(21), false), (Some(1), true)] {
            let e = check_prompt_logprobs(value, stream).unwrap_err();
            assert_eq!(e.param.as_deref(), Some("prompt_logprobs"));
        }
    }
}
