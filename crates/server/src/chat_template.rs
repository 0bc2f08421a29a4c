//! Hugging Face chat templates (Jinja) rendered with minijinja and its Python-compatibility
//! layer, configured as transformers configures jinja2 (`trim_blocks`, `lstrip_blocks`).

use minijinja::{context, Environment, Error as JinjaError, ErrorKind};
use serde_json::Value;
use thiserror::Error;

use crate::strftime::strftime_now;

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
        env.add_template_owned(TEMPLATE_NAME, source.to_string())
            .map_err(|e| TemplateError::Compile(describe(&e)))?;
        Ok(Self {
            env,
            bos_token: bos_token.unwrap_or_default().to_string(),
            eos_token: eos_token.unwrap_or_default().to_string(),
        })
    }

    /// `messages` are OpenAI chat messages as JSON objects (`role`, `content`, ...).
    pub fn render(
        &self,
        messages: &[Value],
        add_generation_prompt: bool,
    ) -> Result<String, TemplateError> {
        let template = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| TemplateError::Compile(describe(&e)))?;
        template
            .render(context! {
                messages => messages,
                add_generation_prompt => add_generation_prompt,
                bos_token => self.bos_token,
                eos_token => self.eos_token,
                tools => Value::Null,
            })
            .map_err(|e| TemplateError::Render(describe(&e)))
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
    fn a_broken_template_is_a_compile_error() {
        assert!(matches!(
            ChatTemplate::new("{% for %}", None, None),
            Err(TemplateError::Compile(_))
        ));
    }
}
