//! The streamed `/v1/messages` answer: Anthropic's server-sent events, `event: <name>` and the
//! event as JSON, sent by the shared pump (`event_pump`); dropping the [`TurnText`] aborts the
//! engine request.

use axum::response::sse::KeepAlive;
use axum::response::Response;

use super::event_pump::{json_event, stream_response, EventSource, Outgoing};
use crate::anthropic::blocks::BlockBuilder;
use crate::anthropic::error::ErrorInfo;
use crate::anthropic::response::{Message, StopReason};
use crate::anthropic::stream::{MessageDeltaBody, OutputUsage, StreamEvent};
use crate::anthropic::turn_text::{TurnEnd, TurnText};
use crate::error::ApiError;
use crate::output::assistant_output::{OutputParser, OutputSpec};

pub(super) fn respond(text: TurnText, output: OutputSpec, start: Message) -> Response {
    stream_response(MessageEvents {
        start: Some(start),
        parser: OutputParser::new(&output),
        blocks: BlockBuilder::default(),
        text: Some(text),
    })
}

/// `message_start`, the content blocks as the text arrives, then `message_delta` (stop reason,
/// usage) and `message_stop`.
struct MessageEvents {
    start: Option<Message>,
    parser: OutputParser,
    blocks: BlockBuilder,
    /// `None` once the turn ended (dropped: after a stop sequence the engine request is still
    /// running, and this aborts it).
    text: Option<TurnText>,
}

fn event(event: &StreamEvent) -> Outgoing {
    json_event(Some(event.name()), event)
}

impl EventSource for MessageEvents {
    /// An idle stream pings, as Anthropic's do (not a bare comment line).
    fn keep_alive(&self) -> KeepAlive {
        match event(&StreamEvent::Ping) {
            Ok(ping) => KeepAlive::default().event(ping),
            Err(_) => KeepAlive::default(),
        }
    }

    async fn next_events(&mut self) -> Option<Vec<Outgoing>> {
        if let Some(message) = self.start.take() {
            // Anthropic's streams ping right after the start, as here.
            let start = StreamEvent::MessageStart { message };
            return Some(vec![event(&start), event(&StreamEvent::Ping)]);
        }
        let text = self.text.as_mut()?;
        let Some((piece, end)) = text.next().await else {
            self.text = None;
            let error = ApiError::internal("a generation ended without finishing");
            let error = ErrorInfo::of(&error);
            return Some(vec![event(&StreamEvent::Error { error })]);
        };
        let mut events = Vec::new();
        self.blocks.on_events(self.parser.feed(&piece), &mut events);
        if let Some(end) = end {
            self.blocks.on_events(self.parser.finish(), &mut events);
            self.blocks.finish(&mut events);
            let output_tokens = text.output_tokens();
            self.text = None;
            // Aborted: the client is gone, nobody reads the rest.
            let stop_reason = StopReason::of(&end, self.blocks.called_tools())?;
            events.push(StreamEvent::MessageDelta {
                delta: MessageDeltaBody {
                    stop_reason: Some(stop_reason),
                    stop_sequence: match end {
                        TurnEnd::StopSequence(s) => Some(s),
                        TurnEnd::Finished(_) => None,
                    },
                },
                usage: OutputUsage { output_tokens },
            });
            events.push(StreamEvent::MessageStop);
        }
        Some(events.iter().map(event).collect())
    }
}
