//! Assistant prefill: the conversation's final message continued rather than closed (vLLM's
//! `continue_final_message`, Anthropic's final assistant turn). The template renders the
//! conversation as usual and the text is cut right after the final message's content, as
//! transformers' `apply_chat_template(continue_final_message=True)` cuts it, so the model's
//! answer goes on from the message's last character.

use serde_json::Value;
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PrefillError {
    #[error("continue_final_message is set but the final message has no text to continue")]
    NoText,
    #[error(
        "continue_final_message is set but the final message does not appear in the chat after \
         applying the chat template (the template changes or drops it)"
    )]
    NotRendered,
}

/// `rendered` cut after the final message's content (its end-of-turn tokens dropped).
pub fn cut_after_final_message(rendered: &str, messages: &[Value]) -> Result<String, PrefillError> {
    let final_text = messages
        .last()
        .and_then(|m| m.get("content"))
        .and_then(Value::as_str)
        .filter(|t| !t.trim().is_empty())
        .ok_or(PrefillError::NoText)?;
    let trimmed = final_text.trim();
    let at = rendered.rfind(trimmed).ok_or(PrefillError::NotRendered)?;
    // The template kept the message's own trailing spacing, or there was none: cut after all
    // of it; else after its trimmed text.
    let whole = final_text.trim_start();
    let end = match rendered[at..].starts_with(whole) {
        true => at + whole.len(),
        false => at + trimmed.len(),
    };
    Ok(rendered[..end].to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const CHATML: &str =
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello, I am<|im_end|>\n";

    #[test]
    fn the_text_ends_where_the_final_message_does() {
        let messages = [
            json!({"role": "user", "content": "Hi"}),
            json!({"role": "assistant", "content": "Hello, I am"}),
        ];
        assert_eq!(
            cut_after_final_message(CHATML, &messages).unwrap(),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello, I am"
        );
    }

    #[test]
    fn trailing_space_is_kept_only_where_the_template_kept_it() {
        let kept = "<s>A: the answer is <e>";
        let with_space = [json!({"role": "assistant", "content": "the answer is "})];
        assert_eq!(
            cut_after_final_message(kept, &with_space).unwrap(),
            "<s>A: the answer is "
        );
        let trimmed_by_template = "<s>A: the answer is<e>";
        assert_eq!(
            cut_after_final_message(trimmed_by_template, &with_space).unwrap(),
            "<s>A: the answer is"
        );
    }

    #[test]
    fn a_final_message_the_template_dropped_or_without_text_is_an_error() {
        let missing = [json!({"role": "assistant", "content": "not there"})];
        assert_eq!(
            cut_after_final_message(CHATML, &missing),
            Err(PrefillError::NotRendered)
        );
        for no_text in [json!(null), json!(" ")] {
            let m = [json!({"role": "assistant", "content": no_text})];
            assert_eq!(
                cut_after_final_message(CHATML, &m),
                Err(PrefillError::NoText)
            );
        }
        assert_eq!(
            cut_after_final_message(CHATML, &[]),
            Err(PrefillError::NoText)
        );
    }
}
