//! The chat stream's chunks: each choice's text goes through its [`OutputParser`] (when the
//! request reads reasoning or tool calls), whose events become content, reasoning and
//! tool-call deltas. A call goes out as two deltas: its id, type and name, then its arguments.

use super::answer::{ChunkFormatter, ChunkPart};
use crate::openai::chunk::{ChatChunkChoice, ChatDelta};
use crate::openai::logprobs::ChatLogprobs;
use crate::openai::tools::{new_call_id, FunctionCallDelta, ToolCallDelta};
use crate::output::assistant_output::{OutputEvent, OutputParser, OutputSpec};
use crate::text::messages::{Delta, Finish};

/// OpenAI's finish reason for an answer that called tools is "tool_calls" ("function_call"
/// in the legacy shape answering `functions`).
pub(super) fn finish_reason(finish: Finish, called_tools: bool, legacy: bool) -> &'static str {
    match finish {
        Finish::Stop if called_tools && legacy => "function_call",
        Finish::Stop if called_tools => "tool_calls",
        other => other.as_openai(),
    }
}

pub(super) struct ChatChunks {
    logprobs: bool,
    /// `Some` when the client asked for `return_token_ids`.
    prompt_ids: Option<Vec<u32>>,
    /// Whether a choice's first chunk (with the role) has gone out.
    started: Vec<bool>,
    /// Per choice, `None` when its text is plain content.
    parsers: Vec<Option<OutputParser>>,
    /// Per choice, the tool calls sent so far (the next call's `index`).
    calls_sent: Vec<usize>,
    /// Calls go out as the legacy `function_call` (the request sent `functions`).
    legacy: bool,
}

impl ChatChunks {
    pub(super) fn new(
        output: &OutputSpec,
        logprobs: bool,
        prompt_ids: Option<Vec<u32>>,
        num_choices: usize,
        legacy: bool,
    ) -> Self {
        Self {
            logprobs,
            prompt_ids,
            started: vec![false; num_choices],
            parsers: (0..num_choices)
                .map(|_| (!output.is_plain()).then(|| OutputParser::new(output)))
                .collect(),
            calls_sent: vec![0; num_choices],
            legacy,
        }
    }

    /// The deltas a choice's new text makes.
    fn text_deltas(&mut self, i: usize, delta: &Delta) -> Vec<ChatDelta> {
        let Some(Some(parser)) = self.parsers.get_mut(i) else {
            return match delta.text.is_empty() {
                true => Vec::new(),
                false => vec![ChatDelta::content(delta.text.clone())],
            };
        };
        let mut events = parser.feed(&delta.text);
        if delta.finish.is_some() {
            events.extend(parser.finish());
        }
        let mut deltas = Vec::with_capacity(events.len());
        for event in events {
            match event {
                OutputEvent::Content(text) => deltas.push(ChatDelta::content(text)),
                OutputEvent::Reasoning(text) => deltas.push(ChatDelta::reasoning(text)),
                OutputEvent::ToolCall(call) if self.legacy => {
                    self.calls_sent[i] += 1;
                    deltas.push(ChatDelta::function_call(FunctionCallDelta {
                        name: Some(call.name),
                        arguments: String::new(),
                    }));
                    deltas.push(ChatDelta::function_call(FunctionCallDelta {
                        name: None,
                        arguments: call.arguments,
                    }));
                }
                OutputEvent::ToolCall(call) => {
                    let index = self.calls_sent[i];
                    self.calls_sent[i] += 1;
                    deltas.push(ChatDelta::tool_call(ToolCallDelta::opening(
                        index,
                        new_call_id(),
                        call.name,
                    )));
                    deltas.push(ChatDelta::tool_call(ToolCallDelta::arguments(
                        index,
                        call.arguments,
                    )));
                }
            }
        }
        deltas
    }
}

impl ChunkFormatter for ChatChunks {
    type Choice = ChatChunkChoice;

    fn on_delta(&mut self, i: usize, delta: Delta) -> Vec<ChunkPart<ChatChunkChoice>> {
        let return_token_ids = self.prompt_ids.is_some();
        let mut out = Vec::new();
        if let Some(started) = self.started.get_mut(i).filter(|s| !**s) {
            *started = true;
            out.push(ChunkPart {
                choice: ChatChunkChoice {
                    index: i,
                    delta: ChatDelta::start(),
                    logprobs: None,
                    finish_reason: None,
                    stop_reason: None,
                    token_ids: return_token_ids.then(Vec::new),
                },
                prompt_token_ids: self.prompt_ids.clone(),
            });
        }
        let ids_to_send = return_token_ids && !delta.token_ids.is_empty();
        let mut deltas = self.text_deltas(i, &delta);
        if deltas.is_empty() {
            if delta.finish.is_none() && delta.logprobs.is_empty() && !ids_to_send {
                return out;
            }
            deltas.push(match delta.finish {
                Some(_) => ChatDelta::default(),
                None => ChatDelta::content(String::new()),
            });
        }
        // The tokens' logprobs and ids ride on the first chunk, the finish on the last.
        let last = deltas.len() - 1;
        let called_tools = self.calls_sent.get(i).is_some_and(|&n| n > 0);
        let mut logprobs = self.logprobs.then(|| ChatLogprobs::new(&delta.logprobs));
        let mut token_ids = return_token_ids.then_some(delta.token_ids);
        for (k, d) in deltas.into_iter().enumerate() {
            out.push(ChunkPart::new(ChatChunkChoice {
                index: i,
                delta: d,
                logprobs: logprobs.take(),
                finish_reason: match k == last {
                    true => delta
                        .finish
                        .map(|f| finish_reason(f, called_tools, self.legacy)),
                    false => None,
                },
                stop_reason: if k == last {
                    delta.stop_reason.clone()
                } else {
                    None
                },
                token_ids: token_ids.take().or_else(|| return_token_ids.then(Vec::new)),
            }));
        }
        out
    }
}
