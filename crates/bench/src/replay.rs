//! The replay workload: real requests from a JSONL file, one per line:
//!
//! ```json
//! {"prompt": "text", "max_tokens": 64}
//! {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 32, "timestamp": 1.5}
//! ```
//!
//! `timestamp` (seconds, optional) replays arrival times: a request is sent that long after the
//! first one's timestamp. Either every line has one or none has.

use std::collections::VecDeque;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::config::Endpoint;
use crate::error::BenchError;
use crate::session::{Prompt, Session, Turn, TurnInput};
use crate::text::TokenCounter;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    prompt: Option<String>,
    messages: Option<Vec<Value>>,
    max_tokens: usize,
    timestamp: Option<f64>,
}

pub fn load(
    path: &Path,
    endpoint: Endpoint,
    counter: &dyn TokenCounter,
) -> Result<VecDeque<Session>, BenchError> {
    let text = std::fs::read_to_string(path)?;
    parse(&text, &path.display().to_string(), endpoint, counter)
}

pub fn parse(
    text: &str,
    name: &str,
    endpoint: Endpoint,
    counter: &dyn TokenCounter,
) -> Result<VecDeque<Session>, BenchError> {
    let mut sessions = VecDeque::new();
    let mut first_timestamp = None;
    for (i, raw) in text.lines().enumerate() {
        let bad = |why: String| BenchError::Dataset {
            path: name.to_string(),
            line: i + 1,
            why,
        };
        if raw.trim().is_empty() {
            continue;
        }
        let line: Line = serde_json::from_str(raw).map_err(|e| bad(e.to_string()))?;
        if line.max_tokens == 0 {
            return Err(bad("max_tokens must be at least 1".into()));
        }
        let (prompt, tokens) = match (line.prompt, line.messages, endpoint) {
            (Some(p), None, Endpoint::Completions) => {
                let n = counter.count(&p);
                (Prompt::Text(p), n)
            }
            (Some(p), None, Endpoint::Chat) => {
                let n = counter.count(&p);
                (
                    Prompt::Messages(vec![serde_json::json!({"role": "user", "content": p})]),
                    n,
                )
            }
            (None, Some(m), Endpoint::Chat) => {
                let n = m
                    .iter()
                    .filter_map(|msg| msg.get("content").and_then(Value::as_str))
                    .map(|c| counter.count(c))
                    .sum();
                (Prompt::Messages(m), n)
            }
            (None, Some(_), Endpoint::Completions) => {
                return Err(bad("a `messages` request needs --endpoint chat".into()))
            }
            _ => return Err(bad("give exactly one of `prompt` and `messages`".into())),
        };
        let arrival = match line.timestamp {
            Some(t) if !(t.is_finite() && t >= 0.0) => {
                return Err(bad(format!("timestamp {t} is not a time in seconds")))
            }
            Some(t) => Some(t - *first_timestamp.get_or_insert(t)),
            None => None,
        };
        if sessions
            .front()
            .is_some_and(|s: &Session| s.arrival.is_some() != arrival.is_some())
        {
            return Err(bad("either every line has a timestamp or none has".into()));
        }
        let previous = sessions.back().and_then(|s: &Session| s.arrival);
        if let (Some(a), Some(p)) = (arrival, previous) {
            if a < p {
                return Err(bad("timestamps must not decrease".into()));
            }
        }
        let turn = Turn {
            input: TurnInput::Replay(prompt, tokens),
            max_tokens: line.max_tokens,
        };
        let mut session = Session::new(sessions.len(), None, vec![turn]);
        session.arrival = arrival;
        sessions.push_back(session);
    }
    if sessions.is_empty() {
        return Err(BenchError::Dataset {
            path: name.to_string(),
            line: 0,
            why: "no requests in the file".into(),
        });
    }
    Ok(sessions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::WordCounter;

    #[test]
    fn lines_become_one_request_sessions_with_relative_arrivals() {
        let text = r#"{"prompt": "a b c", "max_tokens": 4, "timestamp": 10.0}

{"prompt": "d e", "max_tokens": 2, "timestamp": 12.5}
"#;
        let mut s = parse(text, "f", Endpoint::Completions, &WordCounter).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].arrival, Some(0.0));
        assert_eq!(s[1].arrival, Some(2.5));
        let r = s[1].next_request(Endpoint::Completions).unwrap();
        assert_eq!((r.max_tokens, r.estimated_prompt_tokens), (2, 2));
        assert!(matches!(r.prompt, Prompt::Text(t) if t == "d e"));
    }

    #[test]
    fn messages_need_the_chat_endpoint_and_bad_lines_name_their_number() {
        let m = r#"{"messages": [{"role": "user", "content": "x y"}], "max_tokens": 1}"#;
        let mut chat = parse(m, "f", Endpoint::Chat, &WordCounter).unwrap();
        let r = chat[0].next_request(Endpoint::Chat).unwrap();
        assert_eq!(r.estimated_prompt_tokens, 2);
        for (text, line) in [
            (m, 1),
            ("{\"prompt\": \"a\", \"max_tokens\": 1}\n{\"prompt\": 1}", 2),
            (r#"{"prompt": "a", "max_tokens": 0}"#, 1),
            (r#"{"prompt": "a", "messages": [], "max_tokens": 1}"#, 1),
            ("{\"prompt\": \"a\", \"max_tokens\": 1, \"timestamp\": 1}\n{\"prompt\": \"b\", \"max_tokens\": 1}", 2),
            ("{\"prompt\": \"a\", \"max_tokens\": 1, \"timestamp\": 1}\n{\"prompt\": \"b\", \"max_tokens\": 1, \"timestamp\": 5}\n{\"prompt\": \"c\", \"max_tokens\": 1, \"timestamp\": 3}", 3),
        ] {
            match parse(text, "f", Endpoint::Completions, &WordCounter) {
                Err(BenchError::Dataset { line: l, .. }) => assert_eq!(l, line, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(parse("\n", "f", Endpoint::Completions, &WordCounter).is_err());
    }
}
