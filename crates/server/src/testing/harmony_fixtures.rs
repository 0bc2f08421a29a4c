//! The harmony conversations `scripts/make_harmony_fixtures.py` rendered with openai-harmony
//! 0.0.8: the oracle of the native renderer's tests (`harmony_render`) and of the gpt-oss chat
//! template's (`chat_template`), read and turned into a renderer's inputs in one place.

use serde::Deserialize;

use crate::generation::reasoning_effort::{apply_effort, RequestedEffort};
use crate::openai::chat::{template_inputs, ChatMessage};
use crate::openai::tools::ToolSpec;
use crate::text::chat_template::ChatInputs;

const CONVERSATIONS: &str = include_str!("../../tests/fixtures/harmony/conversations.json");

#[derive(Deserialize)]
pub(crate) struct Conversation {
    pub name: String,
    pub messages: Vec<ChatMessage>,
    pub tools: Option<Vec<ToolSpec>>,
    pub reasoning_effort: Option<String>,
    pub date: String,
    pub harmony_text: String,
    pub harmony_tokens: Vec<u32>,
}

pub(crate) fn conversations() -> Vec<Conversation> {
    serde_json::from_str(CONVERSATIONS).expect("the harmony fixtures parse")
}

/// The inputs the chat route hands a renderer for `conv`; `reads_effort`: whether the renderer
/// takes `reasoning_effort` (else a requested effort is refused).
pub(crate) fn chat_inputs(conv: &Conversation, reads_effort: bool) -> ChatInputs {
    let mut kwargs = None;
    let effort = conv.reasoning_effort.clone().map(|effort| RequestedEffort {
        effort,
        param: "reasoning_effort",
    });
    apply_effort(effort, reads_effort, &mut kwargs).unwrap();
    template_inputs(conv.messages.clone(), true, conv.tools.as_deref(), kwargs).unwrap()
}
