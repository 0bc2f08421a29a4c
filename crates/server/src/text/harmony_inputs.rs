//! What gpt-oss's chat template needs of the messages beyond what every template gets.
//!
//! Its checks `"<|channel|>..." in message.content` fail on a `null` content (Python's jinja2
//! fails the same way), which OpenAI clients send for an assistant turn that only calls tools:
//! a `null` content is left out instead, which the template reads as no content. And it reads
//! an assistant turn's reasoning from `thinking`, while OpenAI-style clients send back the
//! `reasoning_content` (vLLM's name, which ferrite answers with) or `reasoning`: they become
//! `thinking`, so the analysis before a tool call is rendered back as the model wrote it.

use serde_json::Value;

/// Adjusts template-ready messages (`openai::chat::template_inputs`) for a harmony template.
pub fn harmony_messages(messages: &mut [Value]) {
    for message in messages {
        let Value::Object(fields) = message else {
            continue;
        };
        if fields.get("content").is_some_and(Value::is_null) {
            fields.remove("content");
        }
        if fields.get("role").and_then(Value::as_str) != Some("assistant")
            || fields.contains_key("thinking")
        {
            continue;
        }
        let reasoning = ["reasoning_content", "reasoning"]
            .iter()
            .find_map(|k| fields.get(*k).filter(|v| v.is_string()).cloned());
        if let Some(reasoning) = reasoning {
            fields.insert("thinking".into(), reasoning);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn null_content_goes_and_reasoning_becomes_thinking() {
        let mut messages = vec![
            json!({"role": "assistant", "content": null, "reasoning_content": "r",
                "tool_calls": []}),
            json!({"role": "assistant", "content": "a", "reasoning": "s", "thinking": "t"}),
            json!({"role": "user", "content": "u", "reasoning_content": "x"}),
        ];
        harmony_messages(&mut messages);
        assert_eq!(
            messages[0],
            json!({"role": "assistant", "reasoning_content": "r", "thinking": "r", "tool_calls": []})
        );
        assert_eq!(messages[1]["thinking"], "t");
        assert!(messages[2].get("thinking").is_none());
    }
}
