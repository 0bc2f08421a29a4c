//! The incremental tool-call parser: text goes in as it is generated, content and complete calls
//! come out. Text that may be the start of a call (a partial `<tool_call>`) is held back until it
//! is known; a call comes out when its block is complete, name and arguments together, so a
//! streamed call is never retracted. A block that is not a well-formed call comes out as the
//! text it was. The complete answer is this parser fed the whole text at once, which is why a
//! stream and a complete answer with the same tokens agree.
//!
//! Whitespace: when the answer has calls, the whitespace around them is layout, not content, so
//! trailing whitespace is held until more text follows and dropped at the end if calls came.

use super::{ParsedToolCall, ToolParsing};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolEvent {
    Content(String),
    Call(ParsedToolCall),
}

#[derive(Debug)]
enum State {
    /// Between blocks: `pending` may end with the start of a marker.
    Outside,
    /// Inside a block: `raw` is its text so far (opening marker included), the format parses
    /// `raw[body_start..]` without the closing marker.
    InBlock {
        raw: String,
        body_start: usize,
        /// A bare call object at the start of the answer (`Markers::bare_call_answer`): it
        /// runs to the end of the answer.
        bare: bool,
    },
    /// Llama 3: the answer did not start with a call, so none follows.
    Plain,
}

#[derive(Debug)]
pub struct ToolCallParser {
    parsing: ToolParsing,
    state: State,
    /// Nothing but whitespace came yet.
    at_start: bool,
    pending: String,
    /// Trailing whitespace of the content so far, not yet sent.
    held_whitespace: String,
    calls: usize,
}

impl ToolCallParser {
    pub fn new(parsing: ToolParsing) -> Self {
        Self {
            parsing,
            state: State::Outside,
            at_start: true,
            pending: String::new(),
            held_whitespace: String::new(),
            calls: 0,
        }
    }

    pub fn feed(&mut self, text: &str, out: &mut Vec<ToolEvent>) {
        self.pending.push_str(text);
        let markers = self.parsing.format.markers();
        loop {
            match &mut self.state {
                State::Plain => {
                    let text = std::mem::take(&mut self.pending);
                    self.content(text, out);
                    return;
                }
                State::InBlock {
                    raw,
                    body_start,
                    bare,
                } => {
                    let before = raw.len();
                    raw.push_str(&std::mem::take(&mut self.pending));
                    let Some(end) = markers.end.filter(|_| !*bare) else {
                        return;
                    };
                    // The closing marker may straddle earlier text and this.
                    let mut from = before.saturating_sub(end.len()).max(*body_start);
                    while !raw.is_char_boundary(from) {
                        from -= 1;
                    }
                    let Some(at) = raw[from..].find(end).map(|i| i + from) else {
                        return;
                    };
                    let (mut raw, body_start) = (std::mem::take(raw), *body_start);
                    self.pending = raw.split_off(at + end.len());
                    self.state = State::Outside;
                    let body = raw[body_start..at].to_string();
                    self.close_block(raw, &body, false, out);
                }
                State::Outside if markers.bare_call_answer && self.at_start => {
                    let text = self.pending.trim_start();
                    if text.is_empty() {
                        return;
                    }
                    self.at_start = false;
                    if text.starts_with('{') {
                        let at = self.pending.len() - text.len();
                        self.enter_block(at, "{", true, out);
                        if let State::InBlock { bare, .. } = &mut self.state {
                            *bare = true;
                        }
                    }
                }
                State::Outside if markers.only_at_start => {
                    let text = self.pending.trim_start();
                    if text.is_empty() {
                        return;
                    }
                    if let Some(&(marker, in_body)) =
                        markers.starts.iter().find(|(m, _)| text.starts_with(m))
                    {
                        let at = self.pending.len() - text.len();
                        self.enter_block(at, marker, in_body, out);
                        continue;
                    }
                    if markers.starts.iter().any(|(m, _)| m.starts_with(text)) {
                        return;
                    }
                    self.state = State::Plain;
                }
                State::Outside => {
                    let found = markers
                        .starts
                        .iter()
                        .filter_map(|&(m, in_body)| self.pending.find(m).map(|i| (i, m, in_body)))
                        .min_by_key(|&(i, _, _)| i);
                    if let Some((at, marker, in_body)) = found {
                        self.enter_block(at, marker, in_body, out);
                        continue;
                    }
                    let keep = longest_marker_prefix(&self.pending, markers.starts);
                    let send = self.pending.len() - keep;
                    let text: String = self.pending.drain(..send).collect();
                    self.content(text, out);
                    return;
                }
            }
        }
    }

    /// A block opens at `pending[at..]` with `marker`: what came before is content.
    fn enter_block(&mut self, at: usize, marker: &str, in_body: bool, out: &mut Vec<ToolEvent>) {
        let mut rest = self.pending.split_off(at);
        let before = std::mem::take(&mut self.pending);
        self.content(before, out);
        let marker_len = if in_body { 0 } else { marker.len() };
        self.pending = rest.split_off(marker_len);
        self.state = State::InBlock {
            raw: rest,
            body_start: marker_len,
            bare: false,
        };
    }

    /// The end of the answer: an unterminated block is parsed as it stands (models stop after
    /// the call without closing it), anything held comes out.
    pub fn finish(&mut self, out: &mut Vec<ToolEvent>) {
        let rest = std::mem::take(&mut self.pending);
        match std::mem::replace(&mut self.state, State::Outside) {
            State::InBlock {
                mut raw,
                body_start,
                bare,
            } => {
                raw.push_str(&rest);
                let body = raw[body_start..].to_string();
                self.close_block(raw, &body, bare, out);
            }
            State::Outside | State::Plain => self.content(rest, out),
        }
        let held = std::mem::take(&mut self.held_whitespace);
        if self.calls == 0 && !self.parsing.forced && !held.is_empty() {
            out.push(ToolEvent::Content(held));
        }
    }

    fn close_block(&mut self, raw: String, body: &str, bare: bool, out: &mut Vec<ToolEvent>) {
        let calls = if bare {
            super::llama3_json::parse_body(body).filter(|calls| {
                calls
                    .iter()
                    .all(|c| self.parsing.tool_names.contains(&c.name))
            })
        } else {
            self.parsing.format.parse_body(body, &self.parsing)
        };
        match calls {
            Some(calls) => {
                for call in calls {
                    if self.parsing.parallel || self.calls == 0 {
                        self.calls += 1;
                        out.push(ToolEvent::Call(call));
                    }
                }
            }
            // Under a forcing grammar the only unreadable block is one cut short: it is no
            // answer, and showing it as content would leak a half-written call.
            None if self.parsing.forced => {}
            None => self.content(raw, out),
        }
    }

    /// Sends content, holding its trailing whitespace back.
    fn content(&mut self, text: String, out: &mut Vec<ToolEvent>) {
        if text.is_empty() {
            return;
        }
        let solid = text.trim_end().len();
        if solid == 0 {
            self.held_whitespace.push_str(&text);
            return;
        }
        let mut send = std::mem::take(&mut self.held_whitespace);
        send.push_str(&text[..solid]);
        self.held_whitespace.push_str(&text[solid..]);
        out.push(ToolEvent::Content(send));
    }
}

/// How many bytes at the end of `text` could be the start of a marker.
fn longest_marker_prefix(text: &str, markers: &[(&str, bool)]) -> usize {
    let mut best = 0;
    for (m, _) in markers {
        for len in (1..m.len().min(text.len() + 1)).rev() {
            if len > best && m.is_char_boundary(len) && text.ends_with(&m[..len]) {
                best = len;
                break;
            }
        }
    }
    best
}

/// The whole answer at once: its content (`None` when only calls and whitespace) and calls.
pub fn parse_complete(parsing: &ToolParsing, text: &str) -> (String, Vec<ParsedToolCall>) {
    let mut parser = ToolCallParser::new(parsing.clone());
    let mut events = Vec::new();
    parser.feed(text, &mut events);
    parser.finish(&mut events);
    join_events(events)
}

/// Events as an answer: the content joined, the calls in order.
pub fn join_events(events: Vec<ToolEvent>) -> (String, Vec<ParsedToolCall>) {
    let mut content = String::new();
    let mut calls = Vec::new();
    for e in events {
        match e {
            ToolEvent::Content(c) => content.push_str(&c),
            ToolEvent::Call(c) => calls.push(c),
        }
    }
    (content, calls)
}
