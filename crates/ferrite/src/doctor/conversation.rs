//! The canned conversation the chat template is rendered with: a system prompt, a question, a
//! tool call and its result when the template speaks of tools, and an answer with reasoning
//! when the template reads it. Each message's text is distinctive, so that a template that
//! drops one can be told.

use serde_json::{json, Map, Value};

pub const SYSTEM: &str = "You are a careful assistant. Answer in one sentence.";
pub const USER: &str = "What is the weather in Paris today?";
pub const TOOL_NAME: &str = "get_weather";
pub const TOOL_RESULT: &str = r#"{"temperature_c": 21, "sky": "clear"}"#;
pub const REASONING: &str = "The tool says 21 degrees and a clear sky.";
pub const ANSWER: &str = "It is 21 degrees and clear in Paris.";

/// The prompt of the greedy run: SmolLM2-Instruct answers it with "The capital of France is
/// Paris." (../shared/models.md), so a wrong answer there is a wrong model.
pub const GREEDY_QUESTION: &str = "What is the capital of France?";
/// The same without a chat template: a completion prompt.
pub const GREEDY_COMPLETION: &str = "The capital of France is";

/// What a template's source says it renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// Tool definitions, calls and results (`tools`, `tool_calls`).
    pub tools: bool,
    /// An assistant message's `reasoning_content`.
    pub reasoning: bool,
    /// The `enable_thinking` switch of Qwen3-style templates.
    pub thinking_switch: bool,
}

impl Features {
    pub fn of(template: &str) -> Features {
        Features {
            tools: template.contains("tools") || template.contains("tool_calls"),
            reasoning: template.contains("reasoning_content"),
            thinking_switch: template.contains("enable_thinking"),
        }
    }

    /// The parts of the conversation rendered, for the ok line.
    pub fn describe(&self) -> String {
        let mut parts = vec!["system", "user", "assistant"];
        if self.tools {
            parts.extend(["tools", "a tool call", "a tool result"]);
        }
        if self.reasoning {
            parts.push("reasoning");
        }
        parts.join(", ")
    }
}

/// The conversation, with `add_generation_prompt` off: it ends with the assistant's answer.
pub fn messages(features: Features) -> Vec<Value> {
    let mut answer = json!({"role": "assistant", "content": ANSWER});
    if features.reasoning {
        answer["reasoning_content"] = json!(REASONING);
    }
    let mut messages = vec![
        json!({"role": "system", "content": SYSTEM}),
        json!({"role": "user", "content": USER}),
    ];
    if features.tools {
        let arguments = json!({"city": "Paris"}).to_string();
        messages.push(json!({"role": "assistant", "content": "", "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": TOOL_NAME, "arguments": arguments}}]}));
        messages.push(
            json!({"role": "tool", "tool_call_id": "call_1", "name": TOOL_NAME,
            "content": TOOL_RESULT}),
        );
    }
    messages.push(answer);
    messages
}

/// The tool definitions, when the template renders tools.
pub fn tools(features: Features) -> Option<Vec<Value>> {
    features.tools.then(|| {
        vec![json!({"type": "function", "function": {
            "name": TOOL_NAME,
            "description": "The current weather in a city.",
            "parameters": {"type": "object",
                "properties": {"city": {"type": "string", "description": "The city's name."}},
                "required": ["city"]}}})]
    })
}

/// Template variables beyond the messages: thinking on where the template has the switch.
pub fn extra_vars(features: Features) -> Map<String, Value> {
    let mut vars = Map::new();
    if features.thinking_switch {
        vars.insert("enable_thinking".into(), Value::Bool(true));
    }
    vars
}

/// The texts the rendered conversation must contain, with what each is: a template that
/// leaves one out shows the model less than the client sent.
pub fn expected_texts(features: Features) -> Vec<(&'static str, &'static str)> {
    let mut texts = vec![
        ("the system message", SYSTEM),
        ("the user message", USER),
        ("the assistant's answer", ANSWER),
    ];
    if features.tools {
        texts.push(("the tool definition or call", TOOL_NAME));
        texts.push(("the tool result", TOOL_RESULT));
    }
    if features.reasoning {
        texts.push(("the assistant's reasoning", REASONING));
    }
    texts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_follow_the_template_source() {
        let chatml = "{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}";
        assert_eq!(
            Features::of(chatml),
            Features {
                tools: false,
                reasoning: false,
                thinking_switch: false
            }
        );
        let qwen3 = "{% if tools %}{% endif %}{{ m.reasoning_content }}{% if enable_thinking %}";
        let f = Features::of(qwen3);
        assert!(f.tools && f.reasoning && f.thinking_switch);
        assert_eq!(
            f.describe(),
            "system, user, assistant, tools, a tool call, a tool result, reasoning"
        );
    }

    #[test]
    fn the_conversation_has_tool_turns_only_for_templates_with_tools() {
        let plain = Features::of("");
        let roles = |m: &[Value]| m.iter().map(|m| m["role"].clone()).collect::<Vec<_>>();
        assert_eq!(roles(&messages(plain)), vec!["system", "user", "assistant"]);
        assert!(tools(plain).is_none());
        let tooled = Features::of("{{ tools }}{{ reasoning_content }}");
        let m = messages(tooled);
        assert_eq!(
            roles(&m),
            vec!["system", "user", "assistant", "tool", "assistant"]
        );
        assert_eq!(m[4]["reasoning_content"], REASONING);
        assert_eq!(tools(tooled).map(|t| t.len()), Some(1));
        assert_eq!(expected_texts(tooled).len(), 6);
    }
}
