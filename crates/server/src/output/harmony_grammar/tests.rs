//! The harmony grammars walked token by token over gpt-oss's tokenizer (the o200k_harmony
//! fixture cut to the tokens of the rendering tests, every printable ASCII character among
//! them), as the engine walks them: end tokens are checked against the mask, never fed.

use ferrite_engine::{Constraint, TokenMask};
use serde_json::json;
use tokenizers::Tokenizer;

use super::*;
use crate::openai::structured::RequestedGrammar;
use crate::output::structured::Grammars;

const TOKENIZER: &str =
    include_str!("../../../tests/fixtures/harmony/o200k_harmony_subset.tokenizer.json");
/// gpt-oss's vocabulary (logits rows).
const VOCAB: usize = 201_088;
/// gpt-oss's end tokens (generation_config.json): `<|return|>`, `<|endoftext|>`, `<|call|>`.
const END_IDS: [u32; 3] = [200_002, 199_999, 200_012];

fn tokenizer() -> Tokenizer {
    Tokenizer::from_bytes(TOKENIZER).unwrap()
}

fn weather() -> ToolSpec {
    serde_json::from_value(json!({"type": "function", "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {
            "location": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["location"], "additionalProperties": false}}}))
    .unwrap()
}

fn compile(answer: &HarmonyAnswer<'_>, analysis_tokens: usize) -> Constraint {
    let tokenizer = tokenizer();
    let lark = harmony_lark(answer, analysis_tokens, |m| tokenizer.token_to_id(m));
    // gpt-oss's tokenizer_config.json names `<|return|>` its EOS, which llguidance is given.
    let grammars = Grammars::new(tokenizer, VOCAB, Some("<|return|>".into()));
    grammars
        .constraint_blocking(&RequestedGrammar {
            grammar: GrammarRequest::Lark(lark.clone()),
            param: "tools",
        })
        .unwrap_or_else(|e| panic!("{}\n{lark}", e.message))
}

/// Whether the model may write `text` (special tokens as such) and end there, as the engine
/// decides it: an end token ends the answer where the mask allows it.
fn accepts(constraint: &Constraint, text: &str) -> bool {
    let ids = tokenizer().encode(text, false).unwrap().get_ids().to_vec();
    let mut live = constraint.0.start();
    let mut mask = TokenMask::new(VOCAB);
    for (i, &token) in ids.iter().enumerate() {
        if live.is_finished() {
            return false;
        }
        mask.reset(VOCAB);
        live.allowed(&mut mask).unwrap();
        let allowed = mask.is_allowed(token)
            || (mask.end_allowed() && END_IDS.contains(&token) && i + 1 == ids.len());
        if !allowed {
            return false;
        }
        if END_IDS.contains(&token) {
            return i + 1 == ids.len();
        }
        live.accept(token).unwrap();
    }
    if live.is_finished() {
        return true;
    }
    mask.reset(VOCAB);
    live.allowed(&mut mask).unwrap();
    mask.end_allowed()
}

const CALL: &str = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>\
                    {\"location\": \"Paris\"}<|call|>";

#[test]
fn a_forced_call_may_follow_an_analysis() {
    let tool = weather();
    let forced = compile(&HarmonyAnswer::Call(&[&tool]), 64);
    assert!(accepts(&forced, CALL));
    let thought =
        "<|channel|>analysis<|message|>The user wants the weather.<|end|><|start|>assistant";
    assert!(accepts(&forced, &format!("{thought}{CALL}")));
    // Arguments outside the schema, a final answer, a second analysis: refused.
    let wrong = CALL.replace("location", "city");
    assert!(!accepts(&forced, &wrong));
    assert!(!accepts(
        &forced,
        "<|channel|>final<|message|>Hello<|return|>"
    ));
    assert!(!accepts(&forced, &format!("{thought}{thought}{CALL}")));
    // The call without its `<|call|>` is not the end yet.
    assert!(!accepts(&forced, CALL.trim_end_matches("<|call|>")));
}

#[test]
fn the_analysis_ends_at_its_bound() {
    let tool = weather();
    let thought = " the weather in Paris";
    let tokens = tokenizer().encode(thought, false).unwrap().len();
    let text = format!("<|channel|>analysis<|message|>{thought}<|end|><|start|>assistant{CALL}");
    let at_bound = compile(&HarmonyAnswer::Call(&[&tool]), tokens);
    assert!(accepts(&at_bound, &text));
    // One token less: the thought must end (`<|end|>`) before its last token.
    let below = compile(&HarmonyAnswer::Call(&[&tool]), tokens - 1);
    assert!(!accepts(&below, &text));
    let none = compile(&HarmonyAnswer::Call(&[&tool]), 0);
    assert!(accepts(&none, CALL));
    assert!(!accepts(&none, &text));
}

#[test]
fn a_structured_output_is_the_final_message() {
    let schema = GrammarRequest::JsonSchema(json!({"type": "object",
        "properties": {"location": {"type": "string"}}, "required": ["location"],
        "additionalProperties": false}));
    let output = compile(
        &HarmonyAnswer::Final {
            output: &schema,
            tools: &[],
        },
        64,
    );
    let answer = "<|channel|>final<|message|>{\"location\": \"Paris\"}<|return|>";
    assert!(accepts(&output, answer));
    let thought = "<|channel|>analysis<|message|>Paris.<|end|><|start|>assistant";
    assert!(accepts(&output, &format!("{thought}{answer}")));
    // The JSON must be whole before `<|return|>`, and the final channel is the only way out.
    assert!(!accepts(
        &output,
        "<|channel|>final<|message|>{\"location\": <|return|>"
    ));
    assert!(!accepts(
        &output,
        "<|channel|>final<|message|>Paris<|return|>"
    ));
    assert!(!accepts(&output, CALL));
    // With tools offered ("auto"), a call is the other way out.
    let tool = weather();
    let either = compile(
        &HarmonyAnswer::Final {
            output: &schema,
            tools: &[&tool],
        },
        64,
    );
    assert!(accepts(&either, answer));
    assert!(accepts(&either, CALL));
}

#[test]
fn regexes_choices_and_grammars_go_into_the_final_message() {
    for (output, good, bad) in [
        (
            GrammarRequest::Regex("[0-9]+/[0-9]+".into()),
            "12/31",
            "12-31",
        ),
        (
            GrammarRequest::Choice(vec!["yes".into(), "no \"way\"".into()]),
            "no \"way\"",
            "maybe",
        ),
        (
            GrammarRequest::Lark("start: \"a\" b\nb: \"b\"+".into()),
            "abbb",
            "ba",
        ),
    ] {
        let constraint = compile(
            &HarmonyAnswer::Final {
                output: &output,
                tools: &[],
            },
            0,
        );
        let text = |t: &str| format!("<|channel|>final<|message|>{t}<|return|>");
        assert!(accepts(&constraint, &text(good)), "{output:?}");
        assert!(!accepts(&constraint, &text(bad)), "{output:?}");
    }
}

#[test]
fn the_analysis_budget_leaves_room_for_the_answer() {
    assert_eq!(analysis_budget(None), MAX_ANALYSIS_TOKENS);
    assert_eq!(analysis_budget(Some(40)), 20);
    assert_eq!(analysis_budget(Some(1)), 0);
    assert_eq!(analysis_budget(Some(100_000)), MAX_ANALYSIS_TOKENS);
}
