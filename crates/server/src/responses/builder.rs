//! The answer's text as output items and stream events. The text goes through the chat path's
//! [`OutputParser`]; its events open, grow and close items: reasoning becomes a `reasoning`
//! item, content a `message`, each call a `function_call`. A change of kind closes the item
//! before. The complete response is built by the same builder (its events dropped), so the
//! streamed and the complete response agree by construction.
//!
//! Whitespace-only content with no message open (the layout between calls, or after them) is
//! held, and goes out only in front of more text; an answer with no item at all still gets
//! its (possibly empty) message, so `output` is never empty.

use super::events::EventBody;
use super::new_id;
use super::object::{ContentPart, ItemStatus, OutputItem};
use crate::openai::tools::new_call_id;
use crate::output::assistant_output::{OutputEvent, OutputParser, OutputSpec};
use crate::output::tool_calls::ParsedToolCall;

/// The item text is being added to.
enum OpenItem {
    Reasoning { id: String, text: String },
    Message { id: String, text: String },
}

pub struct OutputBuilder {
    /// `None`: the text is all content (no reasoning or tool calls are read).
    parser: Option<OutputParser>,
    items: Vec<OutputItem>,
    open: Option<OpenItem>,
    held_whitespace: String,
    reasoning: ReasoningTokens,
}

impl OutputBuilder {
    pub fn new(spec: &OutputSpec) -> Self {
        Self {
            parser: (!spec.is_plain()).then(|| OutputParser::new(spec)),
            items: Vec::new(),
            open: None,
            held_whitespace: String::new(),
            reasoning: ReasoningTokens::default(),
        }
    }

    /// The events for `num_tokens` more tokens whose text is `text`.
    pub fn feed(&mut self, text: &str, num_tokens: usize) -> Vec<EventBody> {
        let parsed = match &mut self.parser {
            Some(parser) => parser.feed(text),
            None if text.is_empty() => Vec::new(),
            None => vec![OutputEvent::Content(text.to_string())],
        };
        self.reasoning.observe(num_tokens, &parsed);
        let mut events = Vec::new();
        for e in parsed {
            self.apply(e, &mut events);
        }
        events
    }

    /// The events that end the answer; `cut_short`: it ran out of tokens.
    pub fn finish(&mut self, cut_short: bool) -> Vec<EventBody> {
        let parsed = self.parser.as_mut().map(|p| p.finish()).unwrap_or_default();
        self.reasoning.observe(0, &parsed);
        let mut events = Vec::new();
        for e in parsed {
            self.apply(e, &mut events);
        }
        let status = match cut_short {
            true => ItemStatus::Incomplete,
            false => ItemStatus::Completed,
        };
        if self.items.is_empty() && self.open.is_none() {
            let text = std::mem::take(&mut self.held_whitespace);
            self.open_message(text, &mut events);
        }
        self.close(status, &mut events);
        events
    }

    /// The output items and the reasoning tokens, once [`Self::finish`]ed.
    pub fn into_output(self) -> (Vec<OutputItem>, usize) {
        (self.items, self.reasoning.count())
    }

    fn apply(&mut self, event: OutputEvent, events: &mut Vec<EventBody>) {
        match (event, &mut self.open) {
            (OutputEvent::Reasoning(text), _) if text.is_empty() => {}
            (OutputEvent::Reasoning(text), Some(OpenItem::Reasoning { id, text: all })) => {
                all.push_str(&text);
                events.push(EventBody::ReasoningTextDelta {
                    item_id: id.clone(),
                    output_index: self.items.len(),
                    content_index: 0,
                    delta: text,
                });
            }
            (OutputEvent::Reasoning(text), _) => {
                self.close(ItemStatus::Completed, events);
                let id = new_id("rs");
                events.push(EventBody::OutputItemAdded {
                    output_index: self.items.len(),
                    item: reasoning_item(id.clone(), None, ItemStatus::InProgress),
                });
                events.push(EventBody::ContentPartAdded {
                    item_id: id.clone(),
                    output_index: self.items.len(),
                    content_index: 0,
                    part: ContentPart::ReasoningText {
                        text: String::new(),
                    },
                });
                self.open = Some(OpenItem::Reasoning {
                    id,
                    text: String::new(),
                });
                self.apply(OutputEvent::Reasoning(text), events);
            }
            (OutputEvent::Content(text), Some(OpenItem::Message { id, text: all })) => {
                all.push_str(&text);
                events.push(EventBody::OutputTextDelta {
                    item_id: id.clone(),
                    output_index: self.items.len(),
                    content_index: 0,
                    delta: text,
                    logprobs: Vec::new(),
                });
            }
            (OutputEvent::Content(text), _) if text.trim().is_empty() => {
                self.held_whitespace.push_str(&text);
            }
            (OutputEvent::Content(text), _) => {
                self.close(ItemStatus::Completed, events);
                let held = std::mem::take(&mut self.held_whitespace);
                self.open_message(held + &text, events);
            }
            (OutputEvent::ToolCall(call), _) => {
                self.close(ItemStatus::Completed, events);
                self.held_whitespace.clear();
                self.add_call(call, events);
            }
        }
    }

    fn open_message(&mut self, text: String, events: &mut Vec<EventBody>) {
        let id = new_id("msg");
        events.push(EventBody::OutputItemAdded {
            output_index: self.items.len(),
            item: message_item(id.clone(), None, ItemStatus::InProgress),
        });
        events.push(EventBody::ContentPartAdded {
            item_id: id.clone(),
            output_index: self.items.len(),
            content_index: 0,
            part: ContentPart::output_text(String::new()),
        });
        self.open = Some(OpenItem::Message {
            id,
            text: String::new(),
        });
        if !text.is_empty() {
            self.apply(OutputEvent::Content(text), events);
        }
    }

    fn add_call(&mut self, call: ParsedToolCall, events: &mut Vec<EventBody>) {
        let output_index = self.items.len();
        let id = new_id("fc");
        let call_id = new_call_id();
        let item = |arguments: &str, status| OutputItem::FunctionCall {
            id: id.clone(),
            call_id: call_id.clone(),
            name: call.name.clone(),
            arguments: arguments.to_string(),
            status,
        };
        events.push(EventBody::OutputItemAdded {
            output_index,
            item: item("", ItemStatus::InProgress),
        });
        // The parser gives a call once it is complete: its arguments go out in one delta.
        events.push(EventBody::FunctionCallArgumentsDelta {
            item_id: id.clone(),
            output_index,
            delta: call.arguments.clone(),
        });
        events.push(EventBody::FunctionCallArgumentsDone {
            item_id: id.clone(),
            output_index,
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        });
        let done = item(&call.arguments, ItemStatus::Completed);
        events.push(EventBody::OutputItemDone {
            output_index,
            item: done.clone(),
        });
        self.items.push(done);
    }

    /// Ends the open item, if any, with its done events.
    fn close(&mut self, status: ItemStatus, events: &mut Vec<EventBody>) {
        let output_index = self.items.len();
        let (item, part) = match self.open.take() {
            None => return,
            Some(OpenItem::Reasoning { id, text }) => {
                events.push(EventBody::ReasoningTextDone {
                    item_id: id.clone(),
                    output_index,
                    content_index: 0,
                    text: text.clone(),
                });
                let part = ContentPart::ReasoningText { text };
                (reasoning_item(id, Some(part.clone()), status), part)
            }
            Some(OpenItem::Message { id, text }) => {
                events.push(EventBody::OutputTextDone {
                    item_id: id.clone(),
                    output_index,
                    content_index: 0,
                    text: text.clone(),
                    logprobs: Vec::new(),
                });
                let part = ContentPart::output_text(text);
                (message_item(id, Some(part.clone()), status), part)
            }
        };
        events.push(EventBody::ContentPartDone {
            item_id: item.id().to_string(),
            output_index,
            content_index: 0,
            part,
        });
        events.push(EventBody::OutputItemDone {
            output_index,
            item: item.clone(),
        });
        self.items.push(item);
    }
}

fn reasoning_item(id: String, part: Option<ContentPart>, status: ItemStatus) -> OutputItem {
    OutputItem::Reasoning {
        id,
        summary: Vec::new(),
        content: part.into_iter().collect(),
        status,
    }
}

fn message_item(id: String, part: Option<ContentPart>, status: ItemStatus) -> OutputItem {
    OutputItem::Message {
        id,
        role: "assistant",
        status,
        content: part.into_iter().collect(),
    }
}

/// Counts `reasoning_tokens`: the tokens generated before the first answer text or call came
/// out of the parser, when reasoning came out before it (none when the model did not reason).
/// A delta that brings both the reasoning's end and the answer's start counts as answer.
#[derive(Debug, Default)]
struct ReasoningTokens {
    reasoned: bool,
    answered: bool,
    before_answer: usize,
}

impl ReasoningTokens {
    fn observe(&mut self, num_tokens: usize, events: &[OutputEvent]) {
        if self.answered {
            return;
        }
        self.reasoned |= events
            .iter()
            .any(|e| matches!(e, OutputEvent::Reasoning(_)));
        if events
            .iter()
            .any(|e| !matches!(e, OutputEvent::Reasoning(_)))
        {
            self.answered = true;
        } else {
            self.before_answer += num_tokens;
        }
    }

    fn count(&self) -> usize {
        if self.reasoned {
            self.before_answer
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests;
