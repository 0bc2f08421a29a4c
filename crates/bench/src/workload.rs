//! The workloads: what sessions a run sends, with every length drawn from a seeded RNG.
//!
//! Lengths are tokens; every default below is overridable by `--prefix-len`, `--input-len`,
//! `--output-len` and `--turns`.
//!
//! - `chatbot`: many users of one assistant. Every conversation starts with the same
//!   500-token system prompt; it has 4 turns, each a new 50–150-token user message after the
//!   previous answer (which the prompt includes); answers are 64–128 tokens. Prefix reuse: the
//!   system prompt across users, and the whole history within a conversation.
//! - `agent`: a few long agent loops. A 2,000-token shared system prompt (instructions and tool
//!   definitions), then 6 turns that each append a 200–600-token tool result to the growing
//!   context (2k to about 7k tokens) and ask for a long 256-token step. Prefix reuse is very high:
//!   each turn's prompt is the previous prompt plus its answer plus the new tool output.
//! - `batch`: offline throughput. Unique 300–1,000-token prompts (no shared prefix), 16–64-token
//!   outputs, one turn, everything submitted at once unless a rate or concurrency is given.
//! - `random`: the synthetic baseline of `vllm bench serve --dataset-name random`: prompts of
//!   `--input-len` tokens (default 256) after an optional shared prefix of `--prefix-len`
//!   (default 0), `--output-len` tokens out (default 128), one turn.
//! - `replay`: requests from a JSONL file (see `replay.rs`).

use std::collections::VecDeque;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;

use crate::config::{BenchConfig, LenRange, WorkloadKind};
use crate::error::BenchError;
use crate::session::{Session, Turn, TurnInput};
use crate::text::{random_text, TokenCounter};

/// The lengths a workload runs with, defaults filled in.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Lengths {
    /// Shared by every request of the run (system prompt); 0 for none.
    pub prefix: usize,
    /// New text per turn: the prompt (single-turn), a user message or a tool result.
    pub input: LenRange,
    pub output: LenRange,
    pub turns: usize,
}

impl Lengths {
    pub fn defaults(kind: WorkloadKind) -> Lengths {
        let l = |prefix, input, output, turns| Lengths {
            prefix,
            input,
            output,
            turns,
        };
        match kind {
            WorkloadKind::Chatbot => l(
                500,
                LenRange::between(50, 150),
                LenRange::between(64, 128),
                4,
            ),
            WorkloadKind::Agent => l(2000, LenRange::between(200, 600), LenRange::fixed(256), 6),
            WorkloadKind::Batch => l(
                0,
                LenRange::between(300, 1000),
                LenRange::between(16, 64),
                1,
            ),
            WorkloadKind::Random | WorkloadKind::Replay => {
                l(0, LenRange::fixed(256), LenRange::fixed(128), 1)
            }
        }
    }

    pub fn for_config(config: &BenchConfig) -> Lengths {
        let d = Lengths::defaults(config.workload);
        let o = &config.lengths;
        Lengths {
            prefix: o.prefix_len.unwrap_or(d.prefix),
            input: o.input_len.unwrap_or(d.input),
            output: o.output_len.unwrap_or(d.output),
            turns: o.turns.unwrap_or(d.turns),
        }
    }
}

/// Makes the sessions of a run, in a reproducible order.
pub struct WorkloadGen {
    kind: WorkloadKind,
    lengths: Lengths,
    rng: StdRng,
    counter: Arc<dyn TokenCounter>,
    shared_prefix: Option<(Arc<str>, usize)>,
    next_id: usize,
    /// Replay: the file's requests, one session each.
    replayed: Option<VecDeque<Session>>,
}

impl WorkloadGen {
    pub fn new(config: &BenchConfig, counter: Arc<dyn TokenCounter>) -> Result<Self, BenchError> {
        let lengths = Lengths::for_config(config);
        let mut rng = StdRng::seed_from_u64(config.seed);
        let replayed = match &config.dataset {
            Some(path) => Some(crate::replay::load(
                path,
                config.endpoint,
                counter.as_ref(),
            )?),
            None => None,
        };
        let shared_prefix = (lengths.prefix > 0 && replayed.is_none()).then(|| {
            let text = random_text(&mut rng, lengths.prefix, counter.as_ref());
            let tokens = counter.count(&text);
            (Arc::from(text), tokens)
        });
        Ok(Self {
            kind: config.workload,
            lengths,
            rng,
            counter,
            shared_prefix,
            next_id: 0,
            replayed,
        })
    }

    pub fn lengths(&self) -> Lengths {
        self.lengths
    }

    /// Requests one session sends (replayed sessions send one).
    pub fn turns_per_session(&self) -> usize {
        if self.replayed.is_some() {
            1
        } else {
            self.lengths.turns
        }
    }

    /// The next session; `None` once a replayed file is used up.
    pub fn next_session(&mut self) -> Option<Session> {
        if let Some(queue) = &mut self.replayed {
            return queue.pop_front();
        }
        let id = self.next_id;
        self.next_id += 1;
        let turns = (0..self.lengths.turns)
            .map(|t| {
                let tokens = self.lengths.input.sample(&mut self.rng);
                let mut text = random_text(&mut self.rng, tokens, self.counter.as_ref());
                if self.kind == WorkloadKind::Agent && t > 0 {
                    text = format!("Tool result: {text}");
                }
                Turn {
                    input: TurnInput::Text {
                        tokens: self.counter.count(&text),
                        text,
                    },
                    max_tokens: self.lengths.output.sample(&mut self.rng),
                }
            })
            .collect();
        Some(Session::new(id, self.shared_prefix.clone(), turns))
    }

    /// One line saying what this workload sends.
    pub fn describe(&self) -> String {
        if let Some(q) = &self.replayed {
            return format!("replay of {} requests", q.len());
        }
        let l = &self.lengths;
        let range = |r: LenRange| {
            if r.min == r.max {
                r.min.to_string()
            } else {
                format!("{}-{}", r.min, r.max)
            }
        };
        let prefix = if l.prefix > 0 {
            format!("{}-token shared prefix, ", l.prefix)
        } else {
            String::new()
        };
        let turns = if l.turns > 1 {
            format!(", {} turns per session", l.turns)
        } else {
            String::new()
        };
        let name = serde_json::to_value(self.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        format!(
            "{name}: {prefix}{} tokens in, {} out{turns}",
            range(l.input),
            range(l.output)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Endpoint;
    use crate::session::Prompt;
    use crate::text::WordCounter;

    fn gen(kind: WorkloadKind, seed: u64) -> WorkloadGen {
        let mut c = BenchConfig::new("http://x:1");
        c.workload = kind;
        c.seed = seed;
        WorkloadGen::new(&c, Arc::new(WordCounter)).unwrap()
    }

    fn text(p: Prompt) -> String {
        match p {
            Prompt::Text(t) => t,
            Prompt::Messages(_) => panic!("completions prompts are text"),
        }
    }

    #[test]
    fn random_prompts_have_the_asked_length_and_are_unique() {
        let mut g = gen(WorkloadKind::Random, 1);
        let a = g
            .next_session()
            .unwrap()
            .next_request(Endpoint::Completions)
            .unwrap();
        let b = g
            .next_session()
            .unwrap()
            .next_request(Endpoint::Completions)
            .unwrap();
        assert_eq!(a.max_tokens, 128);
        assert_eq!(a.estimated_prompt_tokens, 256);
        let (ta, tb) = (text(a.prompt), text(b.prompt));
        assert_eq!(ta.split_whitespace().count(), 256);
        assert_ne!(ta, tb);
    }

    #[test]
    fn chatbot_sessions_share_the_system_prompt_and_draw_lengths_in_range() {
        let mut g = gen(WorkloadKind::Chatbot, 2);
        let mut firsts = Vec::new();
        for _ in 0..5 {
            let mut s = g.next_session().unwrap();
            let r = s.next_request(Endpoint::Chat).unwrap();
            assert!((64..=128).contains(&r.max_tokens));
            // 500 system + 50..=150 user.
            assert!((550..=650).contains(&r.estimated_prompt_tokens));
            let Prompt::Messages(m) = r.prompt else {
                panic!()
            };
            firsts.push(m[0]["content"].as_str().unwrap().to_string());
            let mut turns = 1;
            while s.next_request(Endpoint::Chat).is_some() {
                turns += 1;
            }
            assert_eq!(turns, 4);
        }
        assert!(firsts.windows(2).all(|w| w[0] == w[1]));
        assert_eq!(firsts[0].split_whitespace().count(), 500);
    }

    #[test]
    fn the_same_seed_gives_the_same_sessions() {
        let mut a = gen(WorkloadKind::Batch, 5);
        let mut b = gen(WorkloadKind::Batch, 5);
        for _ in 0..3 {
            let x = a
                .next_session()
                .unwrap()
                .next_request(Endpoint::Completions)
                .unwrap();
            let y = b
                .next_session()
                .unwrap()
                .next_request(Endpoint::Completions)
                .unwrap();
            assert_eq!(x.max_tokens, y.max_tokens);
            assert!((16..=64).contains(&x.max_tokens));
            assert_eq!(text(x.prompt), text(y.prompt));
        }
    }
}
