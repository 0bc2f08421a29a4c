//! The chat template check: the canned conversation renders (with the server's own template
//! engine, as `/v1/chat/completions` renders it), keeps every message, and its text survives
//! the tokenizer (encoded as chat prompts are, without added special tokens, and decoded
//! back with them).

use ferrite_model::tokenizer::LoadedTokenizer;
use ferrite_server::text::chat_template::ChatInputs;
use ferrite_server::ChatTemplate;
use serde_json::json;

use super::conversation::{self, Features};
use super::report::Check;

const RENDER: &str = "chat template";
const ROUND_TRIP: &str = "round trip";

const TEMPLATE_FIX: &str = "correct the template (chat_template.jinja, tokenizer_config.json's \
    chat_template or the GGUF's tokenizer.chat_template), or serve with --chat-template FILE \
    (ferrite doctor takes the same flag)";

/// What the template check hands the later checks.
#[derive(Debug, Default)]
pub struct Rendered {
    /// The whole canned conversation, ending with the assistant's answer.
    pub conversation: Option<String>,
    /// The greedy run's prompt: its question with the generation prompt.
    pub prompt: Option<String>,
}

/// The `chat template` and `round trip` checks; `source` is the template to check (the
/// model's, or `--chat-template`'s).
pub fn check(tok: &LoadedTokenizer, source: Option<&str>) -> (Vec<Check>, Rendered) {
    let Some(source) = source else {
        let checks = vec![
            Check::warning(
                RENDER,
                "the model has no chat template: /v1/chat/completions, /v1/responses and \
                 /v1/messages will answer 400 (completions work)",
                "add chat_template.jinja (or tokenizer_config.json's chat_template) beside the \
                 model, or serve with --chat-template FILE",
            ),
            Check::skipped(ROUND_TRIP, "no chat template"),
        ];
        return (checks, Rendered::default());
    };
    let template =
        match ChatTemplate::new(source, tok.bos_token.as_deref(), tok.eos_token.as_deref()) {
            Ok(t) => t,
            Err(e) => {
                let checks = vec![
                    Check::error(RENDER, e.to_string(), TEMPLATE_FIX),
                    Check::skipped(ROUND_TRIP, "the template does not compile"),
                ];
                return (checks, Rendered::default());
            }
        };
    let features = Features::of(source);
    let mut inputs = ChatInputs::new(conversation::messages(features), false);
    inputs.tools = conversation::tools(features);
    inputs.extra_vars = conversation::extra_vars(features);
    let text = match template.render_inputs(&inputs) {
        Ok(text) => text,
        Err(e) => {
            let checks = vec![
                Check::error(
                    RENDER,
                    format!("a conversation of {}: {e}", features.describe()),
                    TEMPLATE_FIX,
                ),
                Check::skipped(ROUND_TRIP, "the template does not render"),
            ];
            return (checks, Rendered::default());
        }
    };
    let mut question = ChatInputs::new(
        vec![json!({"role": "user", "content": conversation::GREEDY_QUESTION})],
        true,
    );
    question.extra_vars = conversation::extra_vars(features);
    let prompt = template.render_inputs(&question).ok();
    let render = render_check(&text, features);
    let checks = vec![render, round_trip(&tok.tokenizer, &text)];
    let rendered = Rendered {
        conversation: Some(text),
        prompt,
    };
    (checks, rendered)
}

/// Rendered: ok, unless the text lacks a message it was given.
fn render_check(text: &str, features: Features) -> Check {
    let missing: Vec<&str> = conversation::expected_texts(features)
        .into_iter()
        .filter(|(_, t)| !text.contains(t))
        .map(|(what, _)| what)
        .collect();
    let tools_note = if features.tools {
        ""
    } else {
        "; the template renders no tools (tool calls need a template that does: \
         --chat-template)"
    };
    if missing.is_empty() {
        return Check::ok(
            RENDER,
            format!(
                "renders {} ({} characters){tools_note}",
                features.describe(),
                text.chars().count()
            ),
        );
    }
    Check::warning(
        RENDER,
        format!(
            "renders {}, but the text lacks {}",
            features.describe(),
            missing.join(" and ")
        ),
        "the model will not see what the template drops; check the template against the \
         model card's prompt format",
    )
}

/// The rendered text, tokenized as the server tokenizes chat prompts and decoded with special
/// tokens kept, must come back unchanged.
fn round_trip(tokenizer: &tokenizers::Tokenizer, text: &str) -> Check {
    let fix = "the tokenizer changes the prompt's text (a normalizer, a missing byte fallback or \
               an unknown-token piece): use the tokenizer the model was trained with";
    let ids = match tokenizer.encode(text, false) {
        Ok(e) => e.get_ids().to_vec(),
        Err(e) => return Check::error(ROUND_TRIP, format!("cannot tokenize it: {e}"), fix),
    };
    let back = match tokenizer.decode(&ids, false) {
        Ok(back) => back,
        Err(e) => return Check::error(ROUND_TRIP, format!("cannot decode its ids: {e}"), fix),
    };
    match first_difference(text, &back) {
        None => Check::ok(
            ROUND_TRIP,
            format!(
                "the rendered conversation is {} tokens and decodes back to itself",
                ids.len()
            ),
        ),
        Some((at, want, got)) => Check::error(
            ROUND_TRIP,
            format!(
                "the rendered conversation decodes to other text: at character {at}, {want:?} \
                 came back as {got:?}"
            ),
            fix,
        ),
    }
}

/// Where `a` and `b` first differ (a character index) and a few characters of each from there.
pub fn first_difference(a: &str, b: &str) -> Option<(usize, String, String)> {
    if a == b {
        return None;
    }
    let at = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let from = |s: &str| s.chars().skip(at).take(24).collect::<String>();
    Some((at, from(a), from(b)))
}

/// The token that ends the assistant's turn in `conversation`: the longest of `tokens` (the
/// tokenizer's added tokens) that the text after the final answer starts with, whitespace
/// skipped; `None` when the template writes none there.
pub fn end_of_turn<'a>(conversation: &str, tokens: &[&'a str]) -> Option<&'a str> {
    let at = conversation.rfind(conversation::ANSWER)?;
    let rest = conversation[at + conversation::ANSWER.len()..].trim_start();
    tokens
        .iter()
        .filter(|t| !t.is_empty() && rest.starts_with(**t))
        .max_by_key(|t| t.len())
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use conversation::ANSWER;

    #[test]
    fn the_first_difference_is_found_and_shown() {
        assert_eq!(first_difference("abc", "abc"), None);
        assert_eq!(
            first_difference("hello world", "hello  world"),
            Some((6, "world".into(), " world".into()))
        );
        assert_eq!(
            first_difference("ab", "abc"),
            Some((2, String::new(), "c".into()))
        );
    }

    #[test]
    fn the_end_of_turn_token_follows_the_final_answer() {
        let tokens = ["<|im_end|>", "<|im", "<|im_start|>", "<end_of_turn>"];
        let chatml = format!("<|im_start|>assistant\n{ANSWER}<|im_end|>\n");
        assert_eq!(end_of_turn(&chatml, &tokens), Some("<|im_end|>"));
        let gemma = format!("<start_of_turn>model\n{ANSWER}\n<end_of_turn>\n");
        assert_eq!(end_of_turn(&gemma, &tokens), Some("<end_of_turn>"));
        assert_eq!(end_of_turn(&format!("A: {ANSWER}\n\n"), &tokens), None);
        assert_eq!(end_of_turn("no answer here", &tokens), None);
    }

    #[test]
    fn a_template_that_drops_the_system_message_is_a_warning() {
        let features = Features::of("");
        let all = format!("{} {} {ANSWER}", conversation::SYSTEM, conversation::USER);
        assert_eq!(
            render_check(&all, features).status,
            super::super::report::Status::Ok
        );
        let dropped = format!("{} {ANSWER}", conversation::USER);
        let c = render_check(&dropped, features);
        assert_eq!(c.status, super::super::report::Status::Warning);
        assert!(c.message.contains("the system message"), "{}", c.message);
    }
}
