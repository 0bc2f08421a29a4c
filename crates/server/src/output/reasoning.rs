//! Reasoning kept apart from the answer: `<think>...</think>` (Qwen3, DeepSeek-R1 and their
//! distills) goes to `reasoning_content`, the rest to `content`. Incremental like the tool-call
//! parser, and the complete answer is the same parser fed everything at once.
//!
//! Where the answer starts matters: templates that open `<think>` in the prompt itself (DeepSeek
//! -R1, Qwen3's thinking-only models) make the model start inside its reasoning, with only
//! `</think>` in the output; Qwen3 with `enable_thinking: false` closes an empty think block in
//! the prompt, so the answer is all content.

/// How a model marks its reasoning (`--reasoning-parser`, named as vLLM names them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningFormat {
    /// `<think>` optional: reasoning only if the answer (or the prompt's end) opens it.
    Qwen3,
    /// The answer always starts inside the reasoning (the template opened it), `</think>` ends
    /// it; a leading `<think>` written by the model is skipped.
    DeepseekR1,
    /// gpt-oss's harmony format: the `analysis` channel is the reasoning (read by
    /// [`crate::output::harmony`], not by this file's parser).
    OpenaiGptoss,
}

use crate::output::tool_calls::is_harmony_template;

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

impl ReasoningFormat {
    /// The text that ends the reasoning where it is one token of the vocabulary in practice
    /// (`</think>`); gpt-oss ends its analysis channel with a header of several.
    pub fn end_token(self) -> Option<&'static str> {
        match self {
            Self::Qwen3 | Self::DeepseekR1 => Some(CLOSE),
            Self::OpenaiGptoss => None,
        }
    }

    /// The format a chat template's text implies, if it mentions think blocks at all.
    pub fn detect(template: &str) -> Option<Self> {
        if is_harmony_template(template) {
            Some(Self::OpenaiGptoss)
        } else if !template.contains(OPEN) && !template.contains(CLOSE) {
            None
        } else if template.contains("<｜Assistant｜>") {
            Some(Self::DeepseekR1)
        } else {
            Some(Self::Qwen3)
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Qwen3 => "qwen3",
            Self::DeepseekR1 => "deepseek_r1",
            Self::OpenaiGptoss => "openai_gptoss",
        }
    }

    /// Whether an answer to `prompt` starts inside its reasoning.
    pub fn starts_in_reasoning(self, prompt: &str) -> bool {
        match self {
            Self::DeepseekR1 => true,
            Self::OpenaiGptoss => false,
            Self::Qwen3 => prompt.trim_end().ends_with(OPEN),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReasoningEvent {
    Reasoning(String),
    Content(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nothing decided: a `<think>` may open (whitespace and a partial `<think>` are held).
    Start,
    /// Inside the reasoning; `may_open`: a leading `<think>` is still to be skipped.
    Reasoning {
        may_open: bool,
    },
    Content,
}

#[derive(Debug)]
pub struct ReasoningParser {
    phase: Phase,
    pending: String,
    /// Leading whitespace of the reasoning and of the content after it is layout: dropped.
    skip_whitespace: bool,
}

impl ReasoningParser {
    pub fn new(starts_in_reasoning: bool) -> Self {
        Self {
            phase: if starts_in_reasoning {
                Phase::Reasoning { may_open: true }
            } else {
                Phase::Start
            },
            pending: String::new(),
            skip_whitespace: starts_in_reasoning,
        }
    }

    pub fn feed(&mut self, text: &str, out: &mut Vec<ReasoningEvent>) {
        self.pending.push_str(text);
        loop {
            match self.phase {
                Phase::Start => {
                    let t = self.pending.trim_start();
                    if let Some(rest) = t.strip_prefix(OPEN) {
                        self.pending = rest.to_string();
                        self.phase = Phase::Reasoning { may_open: false };
                        self.skip_whitespace = true;
                    } else if OPEN.starts_with(t) {
                        return;
                    } else {
                        self.phase = Phase::Content;
                    }
                }
                Phase::Reasoning { may_open } => {
                    self.skip_leading_whitespace();
                    if may_open {
                        if let Some(rest) = self.pending.strip_prefix(OPEN) {
                            self.pending = rest.to_string();
                            self.skip_whitespace = true;
                        } else if OPEN.starts_with(self.pending.as_str()) {
                            return;
                        }
                        self.phase = Phase::Reasoning { may_open: false };
                        continue;
                    }
                    if let Some(at) = self.pending.find(CLOSE) {
                        let after = self.pending.split_off(at + CLOSE.len());
                        self.pending.truncate(at);
                        let reasoning = std::mem::replace(&mut self.pending, after);
                        push(out, ReasoningEvent::Reasoning(reasoning));
                        self.phase = Phase::Content;
                        self.skip_whitespace = true;
                        continue;
                    }
                    let keep = partial_suffix(&self.pending, CLOSE);
                    let send = self.pending.len() - keep;
                    let reasoning: String = self.pending.drain(..send).collect();
                    push(out, ReasoningEvent::Reasoning(reasoning));
                    return;
                }
                Phase::Content => {
                    self.skip_leading_whitespace();
                    let content = std::mem::take(&mut self.pending);
                    push(out, ReasoningEvent::Content(content));
                    return;
                }
            }
        }
    }

    /// The end of the answer: what was held comes out as what it was (an unclosed reasoning
    /// stays reasoning: the answer ran out while thinking).
    pub fn finish(&mut self, out: &mut Vec<ReasoningEvent>) {
        let rest = std::mem::take(&mut self.pending);
        match self.phase {
            Phase::Start | Phase::Content => push(out, ReasoningEvent::Content(rest)),
            Phase::Reasoning { .. } => push(out, ReasoningEvent::Reasoning(rest)),
        }
    }

    fn skip_leading_whitespace(&mut self) {
        if !self.skip_whitespace {
            return;
        }
        let trimmed = self.pending.trim_start();
        if !trimmed.is_empty() {
            self.skip_whitespace = false;
        }
        self.pending = trimmed.to_string();
    }
}

fn push(out: &mut Vec<ReasoningEvent>, event: ReasoningEvent) {
    match &event {
        ReasoningEvent::Reasoning(t) | ReasoningEvent::Content(t) if t.is_empty() => {}
        _ => out.push(event),
    }
}

/// How many bytes at the end of `text` could be the start of `marker`.
fn partial_suffix(text: &str, marker: &str) -> usize {
    (1..marker.len().min(text.len() + 1))
        .rev()
        .find(|&len| text.ends_with(&marker[..len]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
