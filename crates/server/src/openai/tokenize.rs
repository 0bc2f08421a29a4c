//! vLLM's `POST /tokenize` and `POST /detokenize`, served beside the OpenAI routes.

use serde::{Deserialize, Serialize};

use serde_json::{Map, Value};

use super::chat::ChatMessage;
use super::tools::ToolSpec;

/// vLLM's two shapes: a completion prompt, or chat messages.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum TokenizeRequest {
    Chat {
        model: Option<String>,
        messages: Vec<ChatMessage>,
        add_generation_prompt: Option<bool>,
        continue_final_message: Option<bool>,
        /// Default false, as for chat.
        add_special_tokens: Option<bool>,
        /// Rendered into the prompt as the chat endpoint renders them.
        tools: Option<Vec<ToolSpec>>,
        chat_template_kwargs: Option<Map<String, Value>>,
        /// As chat's (`--trust-request-chat-template`).
        chat_template: Option<String>,
        documents: Option<Vec<Value>>,
    },
    Prompt {
        model: Option<String>,
        prompt: String,
        add_special_tokens: Option<bool>,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct TokenizeResponse {
    pub count: usize,
    pub max_model_len: usize,
    pub tokens: Vec<u32>,
}

#[derive(Debug, Deserialize)]
pub struct DetokenizeRequest {
    pub model: Option<String>,
    pub tokens: Vec<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DetokenizeResponse {
    pub prompt: String,
}
