//! A session: the requests of one user or agent, each turn sent after the previous answer
//! arrived and including it, so that a server's prefix cache sees the real reuse pattern.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::config::Endpoint;

/// What one request asks, before it becomes an HTTP body.
#[derive(Debug, Clone)]
pub enum Prompt {
    Text(String),
    /// Chat messages (`{"role", "content"}` objects).
    Messages(Vec<Value>),
}

/// One request ready to send.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    pub session: usize,
    pub turn: usize,
    pub prompt: Prompt,
    pub max_tokens: usize,
    /// The client's count of the prompt's tokens (used when the server reports no usage).
    pub estimated_prompt_tokens: usize,
}

/// What one turn adds to the conversation.
#[derive(Debug, Clone)]
pub enum TurnInput {
    /// A new user message (or tool output) of about `tokens` tokens.
    Text { text: String, tokens: usize },
    /// A replayed request, sent as it is.
    Replay(Prompt, usize),
}

#[derive(Debug, Clone)]
pub struct Turn {
    pub input: TurnInput,
    pub max_tokens: usize,
}

#[derive(Debug, Clone)]
pub struct Session {
    pub id: usize,
    /// Text every request of the workload starts with (system prompt), and its token count.
    shared_prefix: Option<(Arc<str>, usize)>,
    /// `(is_user, text)` of every message so far after the prefix.
    history: Vec<(bool, String)>,
    history_tokens: usize,
    turns: VecDeque<Turn>,
    next_turn: usize,
    /// A one-request session is a plain prompt, not a transcript.
    single_turn: bool,
    /// Replay: when (seconds after the start) its request arrives.
    pub arrival: Option<f64>,
}

impl Session {
    pub fn new(id: usize, shared_prefix: Option<(Arc<str>, usize)>, turns: Vec<Turn>) -> Self {
        Self {
            id,
            shared_prefix,
            history: Vec::new(),
            history_tokens: 0,
            single_turn: turns.len() == 1,
            turns: turns.into(),
            next_turn: 0,
            arrival: None,
        }
    }

    pub fn has_more_turns(&self) -> bool {
        !self.turns.is_empty()
    }

    /// The next turn's request: the prefix, the conversation so far, and the new message.
    pub fn next_request(&mut self, endpoint: Endpoint) -> Option<RequestSpec> {
        let turn = self.turns.pop_front()?;
        let index = self.next_turn;
        self.next_turn += 1;
        let (prompt, estimated) = match turn.input {
            TurnInput::Replay(prompt, tokens) => (prompt, tokens),
            TurnInput::Text { text, tokens } => {
                self.history.push((true, text));
                self.history_tokens += tokens;
                let prefix_tokens = self.shared_prefix.as_ref().map_or(0, |p| p.1);
                (self.render(endpoint), prefix_tokens + self.history_tokens)
            }
        };
        Some(RequestSpec {
            session: self.id,
            turn: index,
            prompt,
            max_tokens: turn.max_tokens,
            estimated_prompt_tokens: estimated,
        })
    }

    /// The answer to the last turn becomes part of the next one.
    pub fn record_answer(&mut self, text: String, tokens: usize) {
        if self.has_more_turns() {
            self.history.push((false, text));
            self.history_tokens += tokens;
        }
    }

    fn render(&self, endpoint: Endpoint) -> Prompt {
        let prefix = self.shared_prefix.as_ref().map(|p| &*p.0);
        match endpoint {
            Endpoint::Chat => {
                let mut messages: Vec<Value> = prefix
                    .map(|p| json!({"role": "system", "content": p}))
                    .into_iter()
                    .collect();
                messages.extend(self.history.iter().map(|(user, text)| {
                    json!({"role": if *user { "user" } else { "assistant" }, "content": text})
                }));
                Prompt::Messages(messages)
            }
            // One turn: the prefix and the text, like a plain completion prompt.
            Endpoint::Completions if self.single_turn => {
                let text = &self.history[0].1;
                Prompt::Text(match prefix {
                    Some(p) => format!("{p} {text}"),
                    None => text.clone(),
                })
            }
            // A conversation rendered as a plain transcript, ending where the answer goes.
            Endpoint::Completions => {
                let mut out = prefix.map(|p| format!("System: {p}")).unwrap_or_default();
                for (user, text) in &self.history {
                    let role = if *user { "User" } else { "Assistant" };
                    if !out.is_empty() {
                        out.push_str("\n\n");
                    }
                    out.push_str(&format!("{role}: {text}"));
                }
                out.push_str("\n\nAssistant:");
                Prompt::Text(out)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_turn(text: &str) -> Turn {
        Turn {
            input: TurnInput::Text {
                text: text.into(),
                tokens: text.split_whitespace().count(),
            },
            max_tokens: 8,
        }
    }

    #[test]
    fn each_turn_carries_the_whole_conversation_so_far() {
        let prefix = Some((Arc::from("be brief"), 2));
        let mut s = Session::new(
            3,
            prefix,
            vec![text_turn("hi there"), text_turn("and then")],
        );
        let first = s.next_request(Endpoint::Chat).unwrap();
        assert_eq!(
            (first.session, first.turn, first.estimated_prompt_tokens),
            (3, 0, 4)
        );
        s.record_answer("hello you".into(), 2);
        let second = s.next_request(Endpoint::Chat).unwrap();
        let Prompt::Messages(m) = second.prompt else {
            panic!("chat prompts are messages")
        };
        let roles: Vec<&str> = m.iter().map(|x| x["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        assert_eq!(m[2]["content"], "hello you");
        assert_eq!(second.estimated_prompt_tokens, 8);
        assert!(s.next_request(Endpoint::Chat).is_none());
    }

    #[test]
    fn completion_prompts_are_the_prefix_then_the_text_or_a_transcript() {
        let prefix = Some((Arc::from("shared words"), 2));
        let mut single = Session::new(0, prefix.clone(), vec![text_turn("unique words")]);
        let Prompt::Text(t) = single.next_request(Endpoint::Completions).unwrap().prompt else {
            panic!()
        };
        assert_eq!(t, "shared words unique words");
        let mut multi = Session::new(1, prefix, vec![text_turn("q1"), text_turn("q2")]);
        multi.next_request(Endpoint::Completions);
        multi.record_answer("a1".into(), 1);
        let Prompt::Text(t) = multi.next_request(Endpoint::Completions).unwrap().prompt else {
            panic!()
        };
        assert_eq!(
            t,
            "System: shared words\n\nUser: q1\n\nAssistant: a1\n\nUser: q2\n\nAssistant:"
        );
    }
}
