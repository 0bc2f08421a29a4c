//! The `/v1/chat/completions` request and the normalisation of its messages for templates.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::request_fields::refuse_unimplemented;
use super::sampling::SamplingFields;
use super::structured::StructuredFields;
use super::tools::{FunctionCallChoice, FunctionSpec, ToolChoice, ToolSpec};
use crate::error::ApiError;
use crate::text::chat_template::{ChatInputs, RESERVED_VARIABLES};

#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    pub model: Option<String>,
    pub messages: Vec<ChatMessage>,
    /// vLLM's: the request's id (in the answer's id and the logs) unless `X-Request-Id` names one.
    pub request_id: Option<String>,
    #[serde(default)]
    pub logprobs: bool,
    pub top_logprobs: Option<i64>,
    /// vLLM's extension; true unless the client continues a partial assistant message.
    pub add_generation_prompt: Option<bool>,
    /// vLLM's: the final message is continued, not closed (assistant prefill).
    pub continue_final_message: Option<bool>,
    /// vLLM's: the tokenizer's own special tokens added to the rendered prompt (default false:
    /// templates write them).
    pub add_special_tokens: Option<bool>,
    pub tools: Option<Vec<ToolSpec>>,
    pub tool_choice: Option<ToolChoice>,
    pub parallel_tool_calls: Option<bool>,
    /// The deprecated spellings of `tools` and `tool_choice` (`legacy_functions`).
    pub functions: Option<Vec<FunctionSpec>>,
    pub function_call: Option<FunctionCallChoice>,
    /// vLLM's extension: more variables for the chat template (`enable_thinking`, ...).
    pub chat_template_kwargs: Option<Map<String, Value>>,
    /// vLLM's: a chat template of the request's own, in place of the model's (only where the
    /// server was started with `--trust-request-chat-template`).
    pub chat_template: Option<String>,
    /// vLLM's: documents for templates that render retrieval context (the template's
    /// `documents` variable, as transformers' `apply_chat_template(documents=...)`).
    pub documents: Option<Vec<Value>>,
    /// low, medium or high, for models whose template takes it (gpt-oss).
    pub reasoning_effort: Option<String>,
    /// OpenAI's: low, medium or high, for templates with a `verbosity` variable.
    pub verbosity: Option<String>,
    /// vLLM's: `n` beams searched instead of sampling (`generation::beam_search`).
    #[serde(default)]
    pub use_beam_search: bool,
    /// vLLM's: beam scores divide by length to this power (beam search only; default 1).
    pub length_penalty: Option<f64>,
    #[serde(flatten)]
    pub sampling: SamplingFields,
    /// `response_format`, `structured_outputs`, `guided_*`.
    #[serde(flatten)]
    pub structured: StructuredFields,
    /// Whatever no field above took: refused unless ignored on purpose (`request_fields`).
    /// Sorted, so the field refused first does not depend on serde_json's map order
    /// (llguidance turns on `preserve_order`).
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

impl ChatRequest {
    /// The 400 for the first field this server would otherwise ignore.
    pub fn refuse_unimplemented(&self) -> Result<(), ApiError> {
        refuse_unimplemented(&self.rest)
    }

    /// `(add_generation_prompt, continue_final_message)`: continuing the final message leaves
    /// the generation prompt out unless the request asks for both, a 400 as in vLLM and
    /// transformers (vLLM also refuses `continue_final_message` alone, its
    /// `add_generation_prompt` defaulting to true; here leaving it out means false).
    pub fn prompt_ending(&self) -> Result<(bool, bool), ApiError> {
        prompt_ending(self.add_generation_prompt, self.continue_final_message)
    }
}

/// [`ChatRequest::prompt_ending`], for every request shape that takes the two fields.
pub fn prompt_ending(
    add_generation_prompt: Option<bool>,
    continue_final_message: Option<bool>,
) -> Result<(bool, bool), ApiError> {
    match (
        add_generation_prompt,
        continue_final_message.unwrap_or(false),
    ) {
        (Some(true), true) => Err(ApiError::invalid_param(
            "continue_final_message",
            "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
        )),
        (_, true) => Ok((false, true)),
        (add, false) => Ok((add.unwrap_or(true), false)),
    }
}

/// The roles OpenAI's chat API takes; `developer` speaks as `system` where the template knows
/// no developer role (`ChatTemplate::render_inputs`).
const KNOWN_ROLES: &[&str] = &[
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "function",
];

/// The request's own chat template, where the server trusts requests with one
/// (`--trust-request-chat-template`), and its `documents` moved into the template variables.
pub fn request_template(
    trusted: bool,
    chat_template: Option<String>,
    documents: Option<Vec<Value>>,
    kwargs: &mut Option<Map<String, Value>>,
) -> Result<Option<String>, ApiError> {
    if chat_template.is_some() && !trusted {
        return Err(ApiError::invalid_param(
            "chat_template",
            "this server does not run chat templates sent in requests; start it with \
             --trust-request-chat-template to allow them (or --chat-template to replace the \
             model's for every request)",
        ));
    }
    if let Some(documents) = documents {
        let vars = kwargs.get_or_insert_with(Map::new);
        if vars.contains_key("documents") {
            return Err(ApiError::invalid_param(
                "documents",
                "`documents` is given both as a field and in chat_template_kwargs",
            ));
        }
        vars.insert("documents".into(), Value::Array(documents));
    }
    Ok(chat_template)
}

/// Turns the request's messages, tools and template variables into the template's inputs.
pub fn template_inputs(
    messages: Vec<ChatMessage>,
    add_generation_prompt: bool,
    tools: Option<&[ToolSpec]>,
    kwargs: Option<Map<String, Value>>,
) -> Result<ChatInputs, ApiError> {
    if let Some((i, m)) = messages
        .iter()
        .enumerate()
        .find(|(_, m)| !KNOWN_ROLES.contains(&m.role.as_str()))
    {
        // Templates drop a role they do not know without a word (Qwen's renders only the roles
        // it tests for), so a misspelled role would vanish from the prompt: OpenAI's 400.
        return Err(ApiError::invalid_param(
            &format!("messages[{i}].role"),
            format!(
                "Invalid value: '{}'. Supported values are: 'system', 'assistant', 'user', \
                 'function', 'tool', and 'developer'.",
                m.role
            ),
        ));
    }
    let messages = messages
        .into_iter()
        .map(ChatMessage::into_template_value)
        .collect::<Result<Vec<_>, _>>()?;
    let extra_vars = kwargs.unwrap_or_default();
    if let Some(name) = extra_vars
        .keys()
        .find(|k| RESERVED_VARIABLES.contains(&k.as_str()))
    {
        return Err(ApiError::invalid_param(
            "chat_template_kwargs",
            format!("`{name}` is set by the server and cannot be passed in chat_template_kwargs"),
        ));
    }
    let tools = tools
        .filter(|t| !t.is_empty())
        .map(|t| t.iter().map(serde_json::to_value).collect())
        .transpose()
        .map_err(|e| ApiError::invalid_param("tools", format!("unusable tools: {e}")))?;
    Ok(ChatInputs {
        messages,
        add_generation_prompt,
        tools,
        extra_vars,
        ..ChatInputs::default()
    })
}

#[derive(Debug, Clone, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    #[serde(default)]
    pub content: Option<MessageContent>,
    /// `name`, `tool_calls`, ...: handed to the template as they came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Clone, Deserialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
}

impl ChatMessage {
    /// Templates index `message['content']` as a string, so text parts are joined and other
    /// parts (images, audio) refused: this server serves text models only.
    pub fn into_template_value(self) -> Result<Value, ApiError> {
        let content = match self.content {
            None => Value::Null,
            Some(MessageContent::Text(t)) => Value::String(t),
            Some(MessageContent::Parts(parts)) => {
                let mut text = String::new();
                for p in parts {
                    match (p.kind.as_str(), p.text) {
                        ("text", Some(t)) => text.push_str(&t),
                        (kind, _) => {
                            return Err(ApiError::invalid_param(
                                "messages",
                                format!(
                                    "content parts of type `{kind}` are not supported (text only)"
                                ),
                            ))
                        }
                    }
                }
                Value::String(text)
            }
        };
        // A call's `arguments` stay the JSON text the client sent: the chat template gets them
        // parsed (`ChatTemplate::render_inputs`), the harmony renderer as they are.
        let mut obj = self.extra;
        obj.insert("role".into(), Value::String(self.role));
        obj.insert("content".into(), content);
        Ok(Value::Object(obj))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn continuing_the_final_message_leaves_the_generation_prompt_out() {
        assert_eq!(prompt_ending(None, None).unwrap(), (true, false));
        assert_eq!(prompt_ending(Some(false), None).unwrap(), (false, false));
        assert_eq!(prompt_ending(None, Some(true)).unwrap(), (false, true));
        assert_eq!(
            prompt_ending(Some(false), Some(true)).unwrap(),
            (false, true)
        );
        let both = prompt_ending(Some(true), Some(true)).unwrap_err();
        assert_eq!(both.param.as_deref(), Some("continue_final_message"));
    }

    #[test]
    fn text_parts_are_joined_and_other_parts_refused() {
        let m: ChatMessage = serde_json::from_str(
            r#"{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "name": "x"}"#,
        )
        .unwrap();
        assert_eq!(
            m.into_template_value().unwrap(),
            json!({"role": "user", "content": "ab", "name": "x"})
        );
        let img: ChatMessage =
            serde_json::from_str(r#"{"role": "user", "content": [{"type": "image_url"}]}"#)
                .unwrap();
        assert_eq!(img.into_template_value().unwrap_err().status, 400);
    }

    #[test]
    fn tool_call_arguments_stay_the_text_the_client_sent() {
        let m: ChatMessage = serde_json::from_value(json!({"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "f", "arguments": "{\"city\": \"Paris\"}"}}]}))
        .unwrap();
        let v = m.into_template_value().unwrap();
        assert_eq!(
            v["tool_calls"][0]["function"]["arguments"],
            json!("{\"city\": \"Paris\"}")
        );
        assert_eq!(v["content"], Value::Null);
    }

    #[test]
    fn unknown_fields_are_kept_for_refusal_and_known_ones_are_not() {
        let req: ChatRequest = serde_json::from_value(json!({"messages": [], "temperature": 0.5,
            "user": "u", "best_of": 2, "logit_bias": {"1": 2}, "tools": [], "stream": true}))
        .unwrap();
        assert_eq!(req.rest.keys().collect::<Vec<_>>(), ["best_of", "user"]);
        assert_eq!(
            req.refuse_unimplemented().unwrap_err().param.as_deref(),
            Some("best_of")
        );
        assert!(req.sampling.logit_bias.is_some());
        assert!(req.sampling.stream);
    }

    /// Qwen2.5-Coder-0.5B-Instruct's template, as its GGUF ships it.
    const QWEN25: &str =
        include_str!("../../../../fixtures/chat_templates/qwen2.5-coder-0.5b-instruct.jinja");

    #[test]
    fn developer_speaks_as_system_and_an_unknown_role_is_a_400_naming_it() {
        let messages = |role: &str| -> Vec<ChatMessage> {
            serde_json::from_value(json!([{"role": role, "content": "Answer in French."},
                {"role": "user", "content": "Hi"}]))
            .unwrap()
        };
        let qwen = crate::ChatTemplate::new(QWEN25, None, Some("<|im_end|>")).unwrap();
        let render = |role: &str| {
            let inputs = template_inputs(messages(role), true, None, None).unwrap();
            qwen.render_inputs(&inputs).unwrap()
        };
        // Qwen's template renders no developer role: without the mapping the message vanished.
        assert_eq!(render("developer"), render("system"));
        assert!(render("developer").contains("Answer in French."));
        // A template with a developer role of its own gets it as it came.
        let own = crate::ChatTemplate::new(
            "{% for m in messages %}{% if m.role == 'developer' %}D:{% endif %}{{ m.content }}|{% endfor %}",
            None,
            None,
        )
        .unwrap();
        let inputs = template_inputs(messages("developer"), false, None, None).unwrap();
        assert_eq!(
            own.render_inputs(&inputs).unwrap(),
            "D:Answer in French.|Hi|"
        );
        let err = template_inputs(messages("usr"), true, None, None).unwrap_err();
        assert_eq!(err.status, axum::http::StatusCode::BAD_REQUEST);
        assert_eq!(err.param.as_deref(), Some("messages[0].role"));
        assert!(err.message.contains("'usr'"), "{}", err.message);
    }

    #[test]
    fn the_qwen_template_renders_tools_calls_and_results_as_transformers_does() {
        let tools: Vec<ToolSpec> = serde_json::from_value(json!([{"type": "function",
            "function": {"name": "get_weather", "description": "Get the weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
            "required": ["city"]}}}]))
        .unwrap();
        let messages: Vec<ChatMessage> = serde_json::from_value(json!([
            {"role": "user", "content": "What's the weather in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
                "type": "function", "function": {"name": "get_weather",
                "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "22C"},
        ]))
        .unwrap();
        let inputs = template_inputs(messages, true, Some(&tools), None).unwrap();
        let template = crate::ChatTemplate::new(QWEN25, None, Some("<|im_end|>")).unwrap();
        let text = template.render_inputs(&inputs).unwrap();
        // Written from the template's definition; `tojson` as Python's json.dumps, keys in the
        // order the client sent them (Python's dicts keep it, and so do minijinja's maps with
        // `preserve_order`).
        let tool_json = r#"{"type": "function", "function": {"name": "get_weather", "description": "Get the weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}"#;
        let want = format!(
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tool_json}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n</tool_call><|im_end|>\n<|im_start|>user\nWhat's the weather in Paris?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{{\"name\": \"get_weather\", \"arguments\": {{\"city\": \"Paris\"}}}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n22C\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(text, want);
        // What the template writes for a call is what the Hermes parser reads back.
        let turn = text
            .split("<|im_start|>assistant\n")
            .nth(1)
            .and_then(|t| t.split("<|im_end|>").next())
            .unwrap();
        let hermes = crate::output::tool_calls::ToolParsing::new(
            crate::output::tool_calls::ToolCallFormat::Hermes,
            true,
        );
        let (content, calls) = crate::output::tool_calls::parse_complete(&hermes, turn);
        assert_eq!(content, "");
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(calls[0].arguments, r#"{"city": "Paris"}"#);
    }
}
