//! gpt-oss's harmony format: the answer is a sequence of messages
//! `<|start|>ROLE[ to=RECIPIENT]<|channel|>CHANNEL[ to=RECIPIENT][ <|constrain|>TYPE]<|message|>TEXT`
//! ended by `<|end|>`, `<|call|>` (a tool call) or `<|return|>` (the end of the final answer).
//! The prompt ends with `<|start|>assistant`, so the first message's header starts right away
//! (usually with `<|channel|>`). Channels map to the OpenAI fields as vLLM maps them:
//! `analysis` is reasoning, `commentary` to `functions.NAME` is a call of NAME with the message
//! as its JSON arguments, `commentary` without a recipient (a preamble) and `final` are content.
//!
//! The markers are special tokens of gpt-oss's vocabulary (o200k_harmony), which the
//! detokenizer drops by default (`skip_special_tokens`); a request read with this parser is
//! decoded with them kept (see `generation/chat_turn.rs`), so they arrive here as their text.
//! Parsing text rather than token ids keeps one parser interface for every format (streamed
//! deltas are text) and the stream equal to the complete answer by construction; the cost is
//! that the same characters written as ordinary text (not the special token) would read as a
//! marker too, which the model has no reason to write.

use super::tool_calls::{ParsedToolCall, ToolParsing};

const START: &str = "<|start|>";
const CHANNEL: &str = "<|channel|>";
const CONSTRAIN: &str = "<|constrain|>";
const MESSAGE: &str = "<|message|>";
/// What ends a message's text.
const ENDS: [&str; 3] = ["<|end|>", "<|call|>", "<|return|>"];
/// A header longer than this without `<|message|>` is not a header: the text comes out as
/// content (a model that does not write harmony at all loses nothing).
const MAX_HEADER: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HarmonyEvent {
    Reasoning(String),
    Content(String),
    Call(ParsedToolCall),
}

/// Where a message's text goes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    Reasoning,
    Content,
    /// A call of this function: the text is collected and comes out whole at the message's end.
    Call(String),
}

#[derive(Debug)]
enum State {
    /// Reading a header (the text after `<|start|>`, or the answer's start) up to `<|message|>`.
    Header,
    /// Inside a message's text.
    Body { route: Route, text: String },
    /// Between messages: only `<|start|>` is expected.
    Between,
    /// Text that turned out not to be harmony: everything is content from here on.
    Plain,
}

/// One choice's harmony parser.
#[derive(Debug)]
pub struct HarmonyParser {
    state: State,
    pending: String,
    /// `analysis` goes to reasoning (else to content: `--reasoning-parser none`).
    read_reasoning: bool,
    /// Calls are read when the request offered tools; else their text is content.
    tools: Option<ToolParsing>,
    calls: usize,
}

impl HarmonyParser {
    pub fn new(read_reasoning: bool, tools: Option<ToolParsing>) -> Self {
        Self {
            state: State::Header,
            pending: String::new(),
            read_reasoning,
            tools,
            calls: 0,
        }
    }

    pub fn feed(&mut self, text: &str, out: &mut Vec<HarmonyEvent>) {
        self.pending.push_str(text);
        loop {
            match &mut self.state {
                State::Plain => {
                    let text = std::mem::take(&mut self.pending);
                    push(out, HarmonyEvent::Content(text));
                    return;
                }
                State::Header => {
                    let Some(at) = self.pending.find(MESSAGE) else {
                        if self.pending.len() > MAX_HEADER {
                            self.state = State::Plain;
                            continue;
                        }
                        return;
                    };
                    let rest = self.pending.split_off(at + MESSAGE.len());
                    self.pending.truncate(at);
                    let route = self.route(&Header::parse(&self.pending));
                    self.pending = rest;
                    self.state = State::Body {
                        route,
                        text: String::new(),
                    };
                }
                State::Body { route, text } => {
                    let found = ENDS
                        .iter()
                        .filter_map(|end| self.pending.find(end).map(|i| (i, end.len())))
                        .min();
                    let (send, after) = match found {
                        Some((at, len)) => (at, Some(at + len)),
                        None => (self.pending.len() - partial_end(&self.pending), None),
                    };
                    let piece: String = self.pending.drain(..send).collect();
                    match route {
                        Route::Call(_) => text.push_str(&piece),
                        Route::Reasoning => push(out, HarmonyEvent::Reasoning(piece)),
                        Route::Content => push(out, HarmonyEvent::Content(piece)),
                    }
                    let Some(after) = after else {
                        return;
                    };
                    self.pending.drain(..after - send);
                    self.end_message(out);
                    self.state = State::Between;
                }
                State::Between => {
                    let t = self.pending.trim_start();
                    if let Some(rest) = t.strip_prefix(START) {
                        self.pending = rest.to_string();
                        self.state = State::Header;
                    } else if t.starts_with(CHANNEL) {
                        // `<|start|>assistant` left out: the header all the same.
                        self.pending = t.to_string();
                        self.state = State::Header;
                    } else if START.starts_with(t) || CHANNEL.starts_with(t) {
                        return;
                    } else {
                        self.state = State::Plain;
                    }
                }
            }
        }
    }

    /// The end of the answer: an unfinished message ends here (a call cut short by the
    /// length limit still comes out, unless a grammar forced it: then it is dropped, as for
    /// the other formats), a header that never reached its text is content.
    pub fn finish(&mut self, out: &mut Vec<HarmonyEvent>) {
        let rest = std::mem::take(&mut self.pending);
        let forced = self.tools.as_ref().is_some_and(|t| t.forced);
        match &mut self.state {
            State::Body {
                route: Route::Call(_),
                ..
            } if forced => {}
            State::Body { route, text } => {
                match route {
                    Route::Call(_) => text.push_str(&rest),
                    Route::Reasoning => push(out, HarmonyEvent::Reasoning(rest)),
                    Route::Content => push(out, HarmonyEvent::Content(rest)),
                }
                self.end_message(out);
            }
            State::Header | State::Plain => push(out, HarmonyEvent::Content(rest)),
            State::Between => {}
        }
        self.state = State::Between;
    }

    fn end_message(&mut self, out: &mut Vec<HarmonyEvent>) {
        let State::Body {
            route: Route::Call(name),
            text,
        } = &mut self.state
        else {
            return;
        };
        let parallel = self.tools.as_ref().is_some_and(|t| t.parallel);
        if parallel || self.calls == 0 {
            self.calls += 1;
            let arguments = match text.trim() {
                "" => "{}".to_string(),
                args => args.to_string(),
            };
            out.push(HarmonyEvent::Call(ParsedToolCall {
                name: std::mem::take(name),
                arguments,
            }));
        }
    }

    fn route(&self, header: &Header) -> Route {
        let function = header
            .recipient
            .as_deref()
            .and_then(|r| r.strip_prefix("functions."));
        match (
            header.channel.as_deref(),
            function,
            header.recipient.is_some(),
        ) {
            (_, Some(name), _) if self.tools.is_some() => Route::Call(name.to_string()),
            // A call the request did not ask to read (no tools, `tool_choice` "none"): the
            // text is what the model wrote.
            (_, Some(_), _) => Route::Content,
            // Messages to the built-in tools (browser, python), which this server does not
            // run: the model's own business, like its analysis.
            (_, None, true) if self.read_reasoning => Route::Reasoning,
            (Some("analysis"), _, _) if self.read_reasoning => Route::Reasoning,
            _ => Route::Content,
        }
    }
}

/// A message's header, as the model wrote it.
#[derive(Debug, Default, PartialEq, Eq)]
struct Header {
    channel: Option<String>,
    /// `to=...`, before or after the channel.
    recipient: Option<String>,
}

impl Header {
    fn parse(text: &str) -> Self {
        let (role_part, channel_part) = text.split_once(CHANNEL).unwrap_or((text, ""));
        let channel_part = channel_part.replace(CONSTRAIN, " ");
        let recipient = |part: &str| {
            part.split_whitespace()
                .find_map(|w| w.strip_prefix("to="))
                .map(str::to_string)
        };
        Header {
            channel: channel_part
                .split_whitespace()
                .find(|w| !w.starts_with("to="))
                .map(str::to_string),
            recipient: recipient(role_part).or_else(|| recipient(&channel_part)),
        }
    }
}

fn push(out: &mut Vec<HarmonyEvent>, event: HarmonyEvent) {
    match &event {
        HarmonyEvent::Reasoning(t) | HarmonyEvent::Content(t) if t.is_empty() => {}
        _ => out.push(event),
    }
}

/// How many bytes at the end of `text` could be the start of a message's end marker.
fn partial_end(text: &str) -> usize {
    ENDS.iter()
        .filter_map(|end| {
            (1..end.len().min(text.len() + 1))
                .rev()
                .find(|&len| text.ends_with(&end[..len]))
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
