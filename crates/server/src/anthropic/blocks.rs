//! From the assistant's output events (reasoning, content, tool calls: [`OutputEvent`]) to
//! Anthropic's content blocks. The builder writes the block events a stream sends; the complete
//! answer is those same events assembled ([`assemble`]), so the two agree by construction.

use serde_json::{Map, Value};

use super::response::{new_tool_use_id, ContentBlock};
use super::stream::{BlockDelta, StreamEvent};
use crate::output::assistant_output::OutputEvent;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpenBlock {
    Thinking,
    Text,
}

/// Opens, fills and closes blocks as the output events come.
#[derive(Debug, Default)]
pub struct BlockBuilder {
    /// The block still open (thinking and text grow until something else comes).
    open: Option<OpenBlock>,
    /// The index the next block gets.
    next_index: usize,
    called_tools: bool,
}

impl BlockBuilder {
    pub fn on_event(&mut self, event: OutputEvent, out: &mut Vec<StreamEvent>) {
        match event {
            OutputEvent::Reasoning(thinking) if !thinking.is_empty() => {
                let index = self.ensure_open(OpenBlock::Thinking, out);
                out.push(StreamEvent::ContentBlockDelta {
                    index,
                    delta: BlockDelta::Thinking { thinking },
                });
            }
            OutputEvent::Content(text) if !text.is_empty() => {
                let index = self.ensure_open(OpenBlock::Text, out);
                out.push(StreamEvent::ContentBlockDelta {
                    index,
                    delta: BlockDelta::Text { text },
                });
            }
            OutputEvent::ToolCall(call) => {
                self.close(out);
                self.called_tools = true;
                let index = self.start(
                    ContentBlock::ToolUse {
                        id: new_tool_use_id(),
                        name: call.name,
                        input: Value::Object(Map::new()),
                    },
                    out,
                );
                out.push(StreamEvent::ContentBlockDelta {
                    index,
                    delta: BlockDelta::InputJson {
                        partial_json: call.arguments,
                    },
                });
                out.push(StreamEvent::ContentBlockStop { index });
            }
            OutputEvent::Reasoning(_) | OutputEvent::Content(_) => {}
        }
    }

    pub fn on_events(&mut self, events: Vec<OutputEvent>, out: &mut Vec<StreamEvent>) {
        for event in events {
            self.on_event(event, out);
        }
    }

    /// The end of the answer: the open block closes.
    pub fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        self.close(out);
    }

    pub fn called_tools(&self) -> bool {
        self.called_tools
    }

    fn ensure_open(&mut self, kind: OpenBlock, out: &mut Vec<StreamEvent>) -> usize {
        if self.open == Some(kind) {
            return self.next_index - 1;
        }
        self.close(out);
        self.open = Some(kind);
        let empty = match kind {
            OpenBlock::Thinking => ContentBlock::Thinking {
                thinking: String::new(),
                signature: String::new(),
            },
            OpenBlock::Text => ContentBlock::Text {
                text: String::new(),
            },
        };
        self.start(empty, out)
    }

    fn start(&mut self, block: ContentBlock, out: &mut Vec<StreamEvent>) -> usize {
        let index = self.next_index;
        self.next_index += 1;
        out.push(StreamEvent::ContentBlockStart {
            index,
            content_block: block,
        });
        index
    }

    fn close(&mut self, out: &mut Vec<StreamEvent>) {
        if self.open.take().is_some() {
            out.push(StreamEvent::ContentBlockStop {
                index: self.next_index - 1,
            });
        }
    }
}

/// The content blocks a stream's block events describe, as a client joins them: text and
/// thinking deltas appended, a tool call's JSON pieces joined and parsed into its `input`.
pub fn assemble(events: &[StreamEvent]) -> Vec<ContentBlock> {
    let mut blocks: Vec<ContentBlock> = Vec::new();
    let mut json: Vec<String> = Vec::new();
    for event in events {
        match event {
            StreamEvent::ContentBlockStart { content_block, .. } => {
                blocks.push(content_block.clone());
                json.push(String::new());
            }
            StreamEvent::ContentBlockDelta { index, delta } => {
                match (blocks.get_mut(*index), delta) {
                    (Some(ContentBlock::Text { text }), BlockDelta::Text { text: t }) => {
                        text.push_str(t)
                    }
                    (
                        Some(ContentBlock::Thinking { thinking, .. }),
                        BlockDelta::Thinking { thinking: t },
                    ) => thinking.push_str(t),
                    (
                        Some(ContentBlock::ToolUse { .. }),
                        BlockDelta::InputJson { partial_json },
                    ) => {
                        if let Some(j) = json.get_mut(*index) {
                            j.push_str(partial_json)
                        }
                    }
                    _ => {}
                }
            }
            StreamEvent::ContentBlockStop { index } => {
                if let (Some(ContentBlock::ToolUse { input, .. }), Some(text)) =
                    (blocks.get_mut(*index), json.get(*index))
                {
                    // The tool-call parser hands over only JSON objects' text; should one
                    // not parse, the input stays `{}` as the block started.
                    if let Ok(parsed @ Value::Object(_)) = serde_json::from_str::<Value>(text) {
                        *input = parsed;
                    }
                }
            }
            _ => {}
        }
    }
    blocks
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::output::tool_calls::ParsedToolCall;

    fn run(events: Vec<OutputEvent>) -> (Vec<StreamEvent>, bool) {
        let mut builder = BlockBuilder::default();
        let mut out = Vec::new();
        for e in events {
            builder.on_event(e, &mut out);
        }
        builder.finish(&mut out);
        (out, builder.called_tools())
    }

    #[test]
    fn reasoning_text_and_calls_become_blocks_in_order() {
        let (events, called) = run(vec![
            OutputEvent::Reasoning("let me ".into()),
            OutputEvent::Reasoning("think".into()),
            OutputEvent::Content("".into()),
            OutputEvent::Content("Sure".into()),
            OutputEvent::Content(".".into()),
            OutputEvent::ToolCall(ParsedToolCall {
                name: "get_weather".into(),
                arguments: "{\"city\": \"Paris\"}".into(),
            }),
            OutputEvent::Content("after".into()),
        ]);
        assert!(called);
        let names: Vec<_> = events.iter().map(|e| e.name()).collect();
        assert_eq!(
            names,
            [
                "content_block_start", // 0 thinking
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start", // 1 text
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start", // 2 tool_use
                "content_block_delta",
                "content_block_stop",
                "content_block_start", // 3 text
                "content_block_delta",
                "content_block_stop",
            ]
        );
        let blocks = assemble(&events);
        let ContentBlock::ToolUse { id, .. } = &blocks[2] else {
            panic!("{blocks:?}")
        };
        assert!(id.starts_with("toolu_"));
        assert_eq!(
            serde_json::to_value(&blocks).unwrap(),
            json!([
                {"type": "thinking", "thinking": "let me think", "signature": ""},
                {"type": "text", "text": "Sure."},
                {"type": "tool_use", "id": id, "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "text", "text": "after"},
            ])
        );
    }

    #[test]
    fn an_empty_answer_has_no_blocks_and_plain_text_one() {
        let (events, called) = run(vec![OutputEvent::Content(String::new())]);
        assert!(events.is_empty() && !called);
        let (events, _) = run(vec![OutputEvent::Content("hi".into())]);
        assert_eq!(
            assemble(&events),
            vec![ContentBlock::Text { text: "hi".into() }]
        );
    }
}
