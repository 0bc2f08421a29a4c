//! ferrite's harmony prompts against openai-harmony's, token id for token id
//! (`scripts/make_harmony_fixtures.py` wrote the oracle: 20 conversations rendered by
//! openai-harmony 0.0.8, and the o200k_harmony tokenizer cut to the tokens they use).
//! FERRITE_O200K_HARMONY_TOKENIZER=PATH runs the comparison with the whole tokenizer the script
//! writes with `--full-tokenizer PATH`.

use serde_json::json;
use tokenizers::Tokenizer;

use super::*;
use crate::testing::harmony_fixtures::{chat_inputs, conversations};
use crate::text::tokenizer_pool::encode_pieces;

const TOKENIZER: &str =
    include_str!("../../../tests/fixtures/harmony/o200k_harmony_subset.tokenizer.json");

fn tokenizer() -> Tokenizer {
    let mut tokenizer = match std::env::var("FERRITE_O200K_HARMONY_TOKENIZER") {
        Ok(path) => Tokenizer::from_file(path).unwrap(),
        Err(_) => Tokenizer::from_bytes(TOKENIZER).unwrap(),
    };
    tokenizer.set_encode_special_tokens(true);
    tokenizer
}

#[test]
fn twenty_conversations_render_to_openai_harmony_token_ids() {
    let conversations = conversations();
    assert_eq!(conversations.len(), 20);
    let tokenizer = tokenizer();
    let mut differ = Vec::new();
    for conv in &conversations {
        let system = HarmonySystem {
            date: Some(conv.date.clone()),
        };
        let pieces = render(&chat_inputs(conv, true), &system).unwrap();
        let text = prompt_text(&pieces);
        let ids = encode_pieces(&tokenizer, &pieces).unwrap();
        if text != conv.harmony_text || ids != conv.harmony_tokens {
            let at = ids
                .iter()
                .zip(&conv.harmony_tokens)
                .position(|(a, b)| a != b)
                .unwrap_or(ids.len().min(conv.harmony_tokens.len()));
            differ.push(format!(
                "{}: first different token at {at} of {} / {}\n  ferrite: {text:?}\n  harmony: {:?}",
                conv.name,
                ids.len(),
                conv.harmony_tokens.len(),
                conv.harmony_text
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of 20 differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
}

fn chat(messages: serde_json::Value) -> ChatInputs {
    let messages = messages.as_array().unwrap().clone();
    ChatInputs::new(messages, true)
}

fn dated() -> HarmonySystem {
    HarmonySystem {
        date: Some("2026-01-02".into()),
    }
}

#[test]
fn special_token_text_in_a_message_stays_text() {
    let inputs = chat(json!([{"role": "user", "content": "a<|end|>b"}]));
    let pieces = render(&inputs, &dated()).unwrap();
    assert!(pieces.contains(&Piece::Text("a<|end|>b".into())));
    let ids = encode_pieces(&tokenizer(), &pieces).unwrap();
    let end = tokenizer().token_to_id("<|end|>").unwrap();
    // The system message's end, the user message's: the user's `<|end|>` is not a third.
    assert_eq!(ids.iter().filter(|&&id| id == end).count(), 2);
}

#[test]
fn the_date_is_todays_unless_set() {
    let inputs = chat(json!([{"role": "user", "content": "Hi"}]));
    let text = prompt_text(&render(&inputs, &dated()).unwrap());
    assert!(text.contains("Current date: 2026-01-02\n"), "{text}");
    let today = prompt_text(&render(&inputs, &HarmonySystem::default()).unwrap());
    let at = today.find("Current date: ").unwrap() + 14;
    let date = &today.as_bytes()[at..at + 11];
    assert!(
        date[4] == b'-' && date[7] == b'-' && date[10] == b'\n',
        "{today}"
    );
}

#[test]
fn unknown_template_variables_and_unknown_tool_results_are_refused() {
    let mut inputs = chat(json!([{"role": "user", "content": "Hi"}]));
    inputs
        .extra_vars
        .insert("enable_thinking".into(), json!(true));
    assert!(render(&inputs, &dated()).is_ok(), "gpt-oss always reasons");
    inputs.extra_vars.insert("custom".into(), json!(1));
    let err = render(&inputs, &dated()).unwrap_err();
    assert_eq!(err.param(), "chat_template_kwargs");
    assert!(err.to_string().contains("custom"), "{err}");
    let mut inputs = chat(json!([{"role": "user", "content": "Hi"}]));
    inputs
        .extra_vars
        .insert(EFFORT_VARIABLE.into(), json!("extreme"));
    assert_eq!(
        render(&inputs, &dated()).unwrap_err().param(),
        "chat_template_kwargs"
    );
    let orphan = chat(json!([{"role": "tool", "tool_call_id": "nope", "content": "x"}]));
    assert_eq!(render(&orphan, &dated()).unwrap_err().param(), "messages");
    let named = chat(json!([{"role": "tool", "name": "f", "content": "x"}]));
    let text = prompt_text(&render(&named, &dated()).unwrap());
    assert!(
        text.contains("<|start|>functions.f to=assistant<|channel|>commentary<|message|>x<|end|>")
    );
}

#[test]
fn without_a_generation_prompt_the_conversation_ends_with_its_last_message() {
    let mut inputs = chat(json!([{"role": "user", "content": "Hi"}]));
    inputs.add_generation_prompt = false;
    let text = prompt_text(&render(&inputs, &dated()).unwrap());
    assert!(
        text.ends_with("<|start|>user<|message|>Hi<|end|>"),
        "{text}"
    );
}

#[test]
fn the_renderer_is_chosen_by_flag_or_by_the_template() {
    let harmony = "{{ '<|channel|>' }}";
    assert!(ChatRenderer::Auto.renders_harmony(Some(harmony)));
    assert!(!ChatRenderer::Auto.renders_harmony(Some("{{ '<|im_start|>' }}")));
    assert!(!ChatRenderer::Auto.renders_harmony(None));
    assert!(!ChatRenderer::Template.renders_harmony(Some(harmony)));
    assert!(ChatRenderer::Harmony.renders_harmony(None));
}
