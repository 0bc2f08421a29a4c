//! What an assistant's generated text means: reasoning, content and tool calls, by chaining the
//! reasoning parser and the tool-call parser (calls are looked for in the content only, so a
//! call after `</think>` is parsed and one the model merely considered while thinking is not).
//! gpt-oss's harmony answers carry both in their messages' channels: one parser
//! ([`crate::output::harmony`]) reads them instead.

use crate::output::harmony::{HarmonyEvent, HarmonyParser};
use crate::output::reasoning::{ReasoningEvent, ReasoningFormat, ReasoningParser};
use crate::output::tool_calls::{
    ParsedToolCall, ToolCallFormat, ToolCallParser, ToolEvent, ToolParsing,
};

/// What a chat request asks of its answers' text.
#[derive(Debug, Clone, Default)]
pub struct OutputSpec {
    /// The reasoning format, and whether the answer starts inside the reasoning.
    pub reasoning: Option<(ReasoningFormat, bool)>,
    /// How tool calls are read, when they are.
    pub tools: Option<ToolParsing>,
}

impl OutputSpec {
    pub fn is_plain(&self) -> bool {
        self.reasoning.is_none() && self.tools.is_none()
    }

    /// Whether the answer is read as harmony messages (gpt-oss): then its special tokens must
    /// reach the parser as text.
    pub fn is_harmony(&self) -> bool {
        is_harmony(
            self.reasoning.map(|(f, _)| f),
            self.tools.as_ref().map(|t| t.format),
        )
    }
}

/// Whether either parser named is harmony's: the other's part is then read by it too.
pub fn is_harmony(reasoning: Option<ReasoningFormat>, tools: Option<ToolCallFormat>) -> bool {
    reasoning == Some(ReasoningFormat::OpenaiGptoss) || tools == Some(ToolCallFormat::Openai)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputEvent {
    Reasoning(String),
    Content(String),
    ToolCall(ParsedToolCall),
}

/// One choice's parser.
#[derive(Debug)]
pub struct OutputParser {
    reasoning: Option<ReasoningParser>,
    tools: Option<ToolCallParser>,
    harmony: Option<HarmonyParser>,
}

impl OutputParser {
    pub fn new(spec: &OutputSpec) -> Self {
        if spec.is_harmony() {
            let read_reasoning = spec
                .reasoning
                .is_some_and(|(f, _)| f == ReasoningFormat::OpenaiGptoss);
            let tools = spec
                .tools
                .clone()
                .filter(|t| t.format == ToolCallFormat::Openai);
            return Self {
                reasoning: None,
                tools: None,
                harmony: Some(HarmonyParser::new(read_reasoning, tools)),
            };
        }
        Self {
            reasoning: spec
                .reasoning
                .map(|(_, starts_inside)| ReasoningParser::new(starts_inside)),
            tools: spec.tools.clone().map(ToolCallParser::new),
            harmony: None,
        }
    }

    pub fn feed(&mut self, text: &str) -> Vec<OutputEvent> {
        if let Some(h) = &mut self.harmony {
            let mut events = Vec::new();
            h.feed(text, &mut events);
            return events.into_iter().map(OutputEvent::from).collect();
        }
        let mut pieces = Vec::new();
        match &mut self.reasoning {
            Some(r) => r.feed(text, &mut pieces),
            None if !text.is_empty() => pieces.push(ReasoningEvent::Content(text.to_string())),
            None => {}
        }
        self.after_reasoning(pieces, false)
    }

    /// The end of the answer: everything held comes out.
    pub fn finish(&mut self) -> Vec<OutputEvent> {
        if let Some(h) = &mut self.harmony {
            let mut events = Vec::new();
            h.finish(&mut events);
            return events.into_iter().map(OutputEvent::from).collect();
        }
        let mut pieces = Vec::new();
        if let Some(r) = &mut self.reasoning {
            r.finish(&mut pieces);
        }
        self.after_reasoning(pieces, true)
    }

    fn after_reasoning(&mut self, pieces: Vec<ReasoningEvent>, finish: bool) -> Vec<OutputEvent> {
        let mut out = Vec::new();
        let mut tool_events = Vec::new();
        for piece in pieces {
            match (piece, &mut self.tools) {
                (ReasoningEvent::Reasoning(r), _) => out.push(OutputEvent::Reasoning(r)),
                (ReasoningEvent::Content(c), None) => out.push(OutputEvent::Content(c)),
                (ReasoningEvent::Content(c), Some(tools)) => {
                    tools.feed(&c, &mut tool_events);
                    out.extend(tool_events.drain(..).map(OutputEvent::from));
                }
            }
        }
        if let (true, Some(tools)) = (finish, &mut self.tools) {
            tools.finish(&mut tool_events);
            out.extend(tool_events.drain(..).map(OutputEvent::from));
        }
        out
    }
}

impl From<ToolEvent> for OutputEvent {
    fn from(e: ToolEvent) -> Self {
        match e {
            ToolEvent::Content(c) => OutputEvent::Content(c),
            ToolEvent::Call(c) => OutputEvent::ToolCall(c),
        }
    }
}

impl From<HarmonyEvent> for OutputEvent {
    fn from(e: HarmonyEvent) -> Self {
        match e {
            HarmonyEvent::Reasoning(r) => OutputEvent::Reasoning(r),
            HarmonyEvent::Content(c) => OutputEvent::Content(c),
            HarmonyEvent::Call(c) => OutputEvent::ToolCall(c),
        }
    }
}

/// A complete answer's parts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ParsedAnswer {
    /// `None` when the answer is only reasoning and calls.
    pub content: Option<String>,
    pub reasoning: Option<String>,
    pub tool_calls: Vec<ParsedToolCall>,
}

/// The complete answer: the same parser fed the whole text at once.
pub fn parse_answer(spec: &OutputSpec, text: &str) -> ParsedAnswer {
    let mut parser = OutputParser::new(spec);
    let mut events = parser.feed(text);
    events.extend(parser.finish());
    let (mut content, mut reasoning, mut tool_calls) = (String::new(), String::new(), Vec::new());
    for e in events {
        match e {
            OutputEvent::Content(c) => content.push_str(&c),
            OutputEvent::Reasoning(r) => reasoning.push_str(&r),
            OutputEvent::ToolCall(c) => tool_calls.push(c),
        }
    }
    let content_is_optional = !tool_calls.is_empty() || !reasoning.is_empty();
    ParsedAnswer {
        content: (!content.is_empty() || !content_is_optional).then_some(content),
        reasoning: (!reasoning.is_empty()).then_some(reasoning),
        tool_calls,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::tool_calls::ToolCallFormat;

    fn both() -> OutputSpec {
        OutputSpec {
            reasoning: Some((ReasoningFormat::Qwen3, false)),
            tools: Some(ToolParsing::new(ToolCallFormat::Hermes, true)),
        }
    }

    #[test]
    fn a_call_after_reasoning_is_parsed_and_one_inside_it_is_not() {
        let text = "<think>maybe <tool_call>{\"name\": \"x\"}</tool_call>?</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>";
        let answer = parse_answer(&both(), text);
        assert_eq!(
            answer.reasoning.as_deref(),
            Some("maybe <tool_call>{\"name\": \"x\"}</tool_call>?")
        );
        assert_eq!(answer.content, None);
        assert_eq!(answer.tool_calls.len(), 1);
        assert_eq!(answer.tool_calls[0].name, "f");
        // Streamed one character at a time, the events add up to the same answer.
        let mut parser = OutputParser::new(&both());
        let mut events = Vec::new();
        for (i, c) in text.char_indices() {
            events.extend(parser.feed(&text[i..i + c.len_utf8()]));
        }
        events.extend(parser.finish());
        let calls: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                OutputEvent::ToolCall(c) => Some(c.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(calls, answer.tool_calls);
    }

    #[test]
    fn plain_text_is_content_even_when_empty() {
        let plain = OutputSpec::default();
        assert_eq!(parse_answer(&plain, "").content.as_deref(), Some(""));
        assert_eq!(
            parse_answer(&plain, " hi ").content.as_deref(),
            Some(" hi ")
        );
        assert_eq!(parse_answer(&both(), "<think>r</think>").content, None);
    }
}
