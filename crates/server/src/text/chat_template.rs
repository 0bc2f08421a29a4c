//! Hugging Face chat templates (Jinja) rendered with minijinja and its Python-compatibility
//! layer, configured as transformers configures jinja2 (`trim_blocks`, `lstrip_blocks`).

use minijinja::value::Kwargs;
use minijinja::{Environment, Error as JinjaError, ErrorKind, Value as JinjaValue};
use serde::Serialize;
use serde_json::{Map, Value};
use thiserror::Error;

use crate::text::prefill::cut_after_final_message;
use crate::text::strftime::strftime_now;

#[derive(Debug, Error)]
pub enum TemplateError {
    #[error("the chat template does not compile: {0}")]
    Compile(String),
    /// The template refused the conversation (`raise_exception`) or failed on it: the client's
    /// messages are at fault, so this is a 400.
    #[error("the chat template failed on these messages: {0}")]
    Render(String),
    #[error("this model has no chat template; use /v1/completions")]
    Missing,
}

const TEMPLATE_NAME: &str = "chat";

/// A compiled template; each tokenizer worker owns one.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
    /// The template renders a `developer` role of its own (gpt-oss's, some newer ones); others
    /// test only for system/user/assistant/tool and would drop a developer message silently.
    speaks_developer: bool,
}

impl ChatTemplate {
    pub fn new(
        source: &str,
        bos_token: Option<&str>,
        eos_token: Option<&str>,
    ) -> Result<Self, TemplateError> {
        let mut env = Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.add_function(
            "raise_exception",
            |msg: String| -> Result<String, JinjaError> {
                Err(JinjaError::new(ErrorKind::InvalidOperation, msg))
            },
        );
        env.add_function("strftime_now", |format: String| strftime_now(&format));
        env.add_filter("tojson", python_tojson);
        env.add_template_owned(TEMPLATE_NAME, source.to_string())
            .map_err(|e| TemplateError::Compile(describe(&e)))?;
        Ok(Self {
            env,
            bos_token: bos_token.unwrap_or_default().to_string(),
            eos_token: eos_token.unwrap_or_default().to_string(),
            speaks_developer: source.contains("developer"),
        })
    }

    /// `messages` are OpenAI chat messages as JSON objects (`role`, `content`, ...).
    pub fn render(
        &self,
        messages: &[Value],
        add_generation_prompt: bool,
    ) -> Result<String, TemplateError> {
        self.render_inputs(&ChatInputs::new(messages.to_vec(), add_generation_prompt))
    }

    /// Renders with everything transformers' `apply_chat_template` passes: the messages, the
    /// tools (`null` without any) and the caller's extra variables (`chat_template_kwargs`).
    pub fn render_inputs(&self, inputs: &ChatInputs) -> Result<String, TemplateError> {
        let template = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| TemplateError::Compile(describe(&e)))?;
        let mut vars = inputs.extra_vars.clone();
        let mut messages = inputs.messages.clone();
        for message in &mut messages {
            // OpenAI's developer message is the system's voice (as /v1/responses maps it).
            if !self.speaks_developer && message["role"] == "developer" {
                message["role"] = Value::String("system".into());
            }
            if let Some(Value::Array(calls)) = message.get_mut("tool_calls") {
                calls.iter_mut().for_each(arguments_as_object);
            }
        }
        vars.insert("messages".into(), Value::Array(messages));
        vars.insert(
            "add_generation_prompt".into(),
            Value::Bool(inputs.add_generation_prompt),
        );
        vars.insert("bos_token".into(), Value::String(self.bos_token.clone()));
        vars.insert("eos_token".into(), Value::String(self.eos_token.clone()));
        vars.insert(
            "tools".into(),
            inputs.tools.clone().map_or(Value::Null, Value::Array),
        );
        let rendered = template
            .render(JinjaValue::from_serialize(&vars))
            .map_err(|e| TemplateError::Render(describe(&e)))?;
        match inputs.continue_final_message {
            true => cut_after_final_message(&rendered, &inputs.messages)
                .map_err(|e| TemplateError::Render(e.to_string())),
            false => Ok(rendered),
        }
    }
}

/// What a chat template is rendered with.
#[derive(Debug, Clone, Default)]
pub struct ChatInputs {
    pub messages: Vec<Value>,
    pub add_generation_prompt: bool,
    /// OpenAI `tools` entries, as JSON.
    pub tools: Option<Vec<Value>>,
    /// More template variables (`enable_thinking`, ...); the names above take precedence.
    pub extra_vars: Map<String, Value>,
    /// The final message is continued, not closed (`text::prefill`).
    pub continue_final_message: bool,
    /// The rendered text is tokenized with the tokenizer's own special tokens added (a BOS
    /// the template may already have written): vLLM's `add_special_tokens`, off for chat.
    pub add_special_tokens: bool,
    /// A template of the request's own, rendered in place of the model's.
    pub template: Option<String>,
}

impl ChatInputs {
    pub fn new(messages: Vec<Value>, add_generation_prompt: bool) -> Self {
        Self {
            messages,
            add_generation_prompt,
            ..Self::default()
        }
    }
}

/// The variables [`ChatTemplate::render_inputs`] sets itself: `chat_template_kwargs` may not
/// replace them.
pub const RESERVED_VARIABLES: &[&str] = &[
    "messages",
    "add_generation_prompt",
    "bos_token",
    "eos_token",
    "tools",
];

/// The variable reasoning models' templates read their effort from (gpt-oss's:
/// `generation::reasoning_effort`).
pub const EFFORT_VARIABLE: &str = "reasoning_effort";

/// Whether a chat template reads [`EFFORT_VARIABLE`].
pub fn template_reads_effort(template: &str) -> bool {
    template.contains(EFFORT_VARIABLE)
}

/// The variable OpenAI's `verbosity` sets (`generation::verbosity`).
pub const VERBOSITY_VARIABLE: &str = "verbosity";

/// Whether a chat template reads `verbosity`.
pub fn template_reads_verbosity(template: &str) -> bool {
    template.contains(VERBOSITY_VARIABLE)
}

/// OpenAI sends a call's arguments as a JSON string; templates write them with `tojson` and
/// expect the object (as vLLM and transformers hand it), so a string holding JSON is parsed.
fn arguments_as_object(call: &mut Value) {
    let Some(arguments) = call
        .get_mut("function")
        .and_then(|f| f.get_mut("arguments"))
    else {
        return;
    };
    if let Some(parsed) = arguments
        .as_str()
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
    {
        *arguments = parsed;
    }
}

/// `tojson` as transformers defines it for templates: Python's `json.dumps` (`", "` and `": "`
/// separators, no HTML escaping, non-ASCII kept), `indent` honoured. minijinja's own escapes
/// `<`, `>`, `&` and `'` and writes no spaces, which would show a model tool schemas in a form
/// it was not trained on.
fn python_tojson(value: &JinjaValue, kwargs: Kwargs) -> Result<JinjaValue, JinjaError> {
    let indent: Option<usize> = kwargs.get("indent")?;
    // Accepted for compatibility; maps are already in a fixed order and output is not ASCII-escaped.
    for ignored in ["ensure_ascii", "sort_keys", "separators"] {
        let _: Option<JinjaValue> = kwargs.get(ignored)?;
    }
    let mut out = Vec::new();
    let result = match indent {
        Some(n) => {
            let pad = vec![b' '; n];
            let fmt = serde_json::ser::PrettyFormatter::with_indent(&pad);
            value.serialize(&mut serde_json::Serializer::with_formatter(&mut out, fmt))
        }
        None => value.serialize(&mut serde_json::Serializer::with_formatter(
            &mut out,
            PythonFormatter,
        )),
    };
    result.map_err(|e| JinjaError::new(ErrorKind::BadSerialization, e.to_string()))?;
    let text = String::from_utf8(out)
        .map_err(|e| JinjaError::new(ErrorKind::BadSerialization, e.to_string()))?;
    Ok(JinjaValue::from_safe_string(text))
}

/// Python's default `json.dumps` layout: `{"a": 1, "b": [1, 2]}`.
struct PythonFormatter;

impl serde_json::ser::Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        python_separator(writer, first)
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        python_separator(writer, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
    ) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

/// `", "` before every item but the first.
fn python_separator<W: ?Sized + std::io::Write>(
    writer: &mut W,
    first: bool,
) -> std::io::Result<()> {
    if first {
        Ok(())
    } else {
        writer.write_all(b", ")
    }
}

/// minijinja's Display omits the cause chain, which is where `raise_exception`'s text sits.
fn describe(e: &JinjaError) -> String {
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

#[cfg(test)]
mod harmony_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// SmolLM2-Instruct's template, as its tokenizer_config.json ships it.
    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    #[test]
    fn chatml_renders_as_transformers_does() {
        let t = ChatTemplate::new(SMOLLM2, None, Some("<|im_end|>")).unwrap();
        let msgs = [json!({"role": "user", "content": "Hi"})];
        // Expected string written from the template's definition.
        let want = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
        assert_eq!(t.render(&msgs, true).unwrap(), want);
        assert!(!t.render(&msgs, false).unwrap().ends_with("assistant\n"));
    }

    #[test]
    fn block_whitespace_is_trimmed_like_jinja2_with_trim_and_lstrip() {
        let src = "{% for m in messages %}\n    {{ m.content }}\n{% endfor %}";
        let t = ChatTemplate::new(src, None, None).unwrap();
        let msgs = [
            json!({"role": "user", "content": "a"}),
            json!({"role": "user", "content": "b"}),
        ];
        assert_eq!(t.render(&msgs, false).unwrap(), "    a\n    b\n");
    }

    #[test]
    fn python_methods_and_raise_exception_work() {
        let src = "{% if messages[0]['role'] == 'assistant' %}{{ raise_exception('Conversation must start with user') }}{% endif %}{{ messages[0]['content'].strip().upper() }}{{ bos_token }}";
        let t = ChatTemplate::new(src, Some("<s>"), None).unwrap();
        let ok = t
            .render(&[json!({"role": "user", "content": "  hey "})], false)
            .unwrap();
        assert_eq!(ok, "HEY<s>");
        let err = t
            .render(&[json!({"role": "assistant", "content": "x"})], false)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("Conversation must start with user"),
            "{err}"
        );
    }

    #[test]
    fn tojson_writes_what_python_json_dumps_writes() {
        let t =
            ChatTemplate::new("{{ x | tojson }}|{{ x | tojson(indent=2) }}", None, None).unwrap();
        let mut inputs = ChatInputs::default();
        inputs
            .extra_vars
            .insert("x".into(), json!({"a": [1, "<b>'s é"], "c": {}}));
        assert_eq!(
            t.render_inputs(&inputs).unwrap(),
            "{\"a\": [1, \"<b>'s é\"], \"c\": {}}|{\n  \"a\": [\n    1,\n    \"<b>'s é\"\n  ],\n  \"c\": {}\n}"
        );
    }

    #[test]
    fn tools_and_extra_variables_reach_the_template() {
        let src = "{% if tools %}{% for t in tools %}{{ t.function.name }};{% endfor %}{% endif %}{{ enable_thinking }}";
        let t = ChatTemplate::new(src, None, None).unwrap();
        let mut inputs = ChatInputs::new(vec![], false);
        assert_eq!(t.render_inputs(&inputs).unwrap(), "");
        inputs.tools = Some(vec![json!({"type": "function", "function": {"name": "f"}})]);
        inputs
            .extra_vars
            .insert("enable_thinking".into(), json!(false));
        assert_eq!(t.render_inputs(&inputs).unwrap(), "f;False");
    }

    #[test]
    fn tool_call_arguments_reach_the_template_as_objects() {
        let t = ChatTemplate::new(
            "{{ messages[0].tool_calls[0].function.arguments.city }}",
            None,
            None,
        )
        .unwrap();
        let call = json!({"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
            "function": {"name": "f", "arguments": "{\"city\": \"Paris\"}"}}]});
        assert_eq!(t.render(&[call], false).unwrap(), "Paris");
    }

    #[test]
    fn a_broken_template_is_a_compile_error() {
        assert!(matches!(
            ChatTemplate::new("{% for %}", None, None),
            Err(TemplateError::Compile(_))
        ));
    }
}
