use ferrite_engine::{Constraint, TokenMask};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use super::*;
use crate::openai::structured::{GrammarRequest, RequestedGrammar};
use crate::testing::byte_level_tokenizer;

fn grammars() -> Grammars {
    let tokenizer = byte_level_tokenizer();
    let vocab = tokenizer.get_vocab_size(true) + 7;
    Grammars::new(tokenizer, vocab, Some("<|im_end|>".into()))
}

fn requested(grammar: GrammarRequest) -> RequestedGrammar {
    RequestedGrammar {
        grammar,
        param: "response_format",
    }
}

/// A random walk through what the constraint allows (a "model" with random logits): the
/// text it produces, or `None` if it ran out of steps.
fn random_output(constraint: &Constraint, vocab: usize, seed: u64) -> Option<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut live = constraint.0.start();
    let mut tokens = Vec::new();
    let mut mask = TokenMask::new(vocab);
    for _ in 0..400 {
        mask.reset(vocab);
        live.allowed(&mut mask).unwrap();
        let allowed: Vec<u32> = (0..vocab as u32).filter(|&t| mask.is_allowed(t)).collect();
        if mask.end_allowed() && (allowed.is_empty() || rng.random_bool(0.3)) {
            break;
        }
        assert!(!allowed.is_empty(), "a dead end after {tokens:?}");
        let token = allowed[rng.random_range(0..allowed.len())];
        live.accept(token).unwrap();
        tokens.push(token);
        if live.is_finished() {
            break;
        }
    }
    let text = byte_level_tokenizer().decode(&tokens, false).unwrap();
    Some(text)
}

#[test]
fn random_walks_through_a_schema_give_matching_json() {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 5},
            "n": {"type": "integer", "minimum": 0, "maximum": 99},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}
        },
        "required": ["name", "n", "tags"],
        "additionalProperties": false
    });
    let g = grammars();
    let constraint = g
        .constraint_blocking(&requested(GrammarRequest::JsonSchema(schema)))
        .unwrap();
    let vocab = byte_level_tokenizer().get_vocab_size(true) + 7;
    for seed in 0..20 {
        let text = random_output(&constraint, vocab, seed).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let n = value["n"].as_i64().unwrap();
        assert!((0..=99).contains(&n), "{text}");
        assert!(
            value["name"].as_str().unwrap().chars().count() <= 5,
            "{text}"
        );
        let tags = value["tags"].as_array().unwrap();
        assert!(
            tags.len() <= 3 && tags.iter().all(|t| t == "a" || t == "b"),
            "{text}"
        );
        assert_eq!(value.as_object().unwrap().len(), 3, "{text}");
    }
}

#[test]
fn choices_and_regexes_constrain_the_whole_output() {
    let g = grammars();
    let vocab = byte_level_tokenizer().get_vocab_size(true) + 7;
    let choices = vec!["yes".to_string(), "no (a.k.a. nope)".to_string()];
    let choice = g
        .constraint_blocking(&requested(GrammarRequest::Choice(choices.clone())))
        .unwrap();
    let regex = g
        .constraint_blocking(&requested(GrammarRequest::Regex("[0-9]{3}-[a-c]+".into())))
        .unwrap();
    for seed in 0..20 {
        let text = random_output(&choice, vocab, seed).unwrap();
        assert!(choices.contains(&text), "{text}");
        let text = random_output(&regex, vocab, seed).unwrap();
        let (digits, letters) = text.split_once('-').unwrap();
        assert!(
            digits.len() == 3 && digits.chars().all(|c| c.is_ascii_digit()),
            "{text}"
        );
        assert!(
            !letters.is_empty() && letters.chars().all(|c| "abc".contains(c)),
            "{text}"
        );
    }
}

#[test]
fn an_unsupported_keyword_is_a_400_naming_it() {
    let schema = json!({"type": "array", "items": {"type": "integer"}, "uniqueItems": true});
    let e = grammars()
        .constraint_blocking(&requested(GrammarRequest::JsonSchema(schema)))
        .err()
        .unwrap();
    assert_eq!(e.status, 400);
    assert_eq!(e.param.as_deref(), Some("response_format"));
    assert!(e.message.contains("uniqueItems"), "{}", e.message);
    let bad_regex = grammars()
        .constraint_blocking(&requested(GrammarRequest::Regex("(".into())))
        .err()
        .unwrap();
    assert_eq!(bad_regex.status, 400);
}

#[test]
fn compiled_grammars_are_cached_by_source() {
    let g = grammars();
    let schema = json!({"type": "object"});
    let a = g
        .constraint_blocking(&requested(GrammarRequest::JsonSchema(schema.clone())))
        .unwrap();
    let b = g
        .constraint_blocking(&requested(GrammarRequest::JsonSchema(schema)))
        .unwrap();
    assert_eq!(a, b, "the same compiled grammar");
}
