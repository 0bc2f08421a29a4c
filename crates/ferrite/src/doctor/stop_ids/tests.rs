use super::*;
use crate::doctor::report::Status;

fn source(name: &str, ids: &[u64]) -> Source {
    Source {
        name: name.into(),
        ids: ids.to_vec(),
    }
}

fn names(id: u32) -> Option<String> {
    match id {
        2 => Some("<|im_end|>".into()),
        0 => Some("<|endoftext|>".into()),
        _ => None,
    }
}

fn facts<'a>(stop_ids: &'a [u32], end_of_turn: Option<(&'a str, Option<u32>)>) -> Facts<'a> {
    Facts {
        vocab: 100,
        stop_ids,
        end_of_turn,
        name_of: &names,
    }
}

fn found(sources: Vec<Source>) -> Sources {
    Sources {
        sources,
        problems: vec![],
    }
}

#[test]
fn qwen_and_llama3_files_agree_through_generation_config() {
    // Qwen2.5-Instruct: config.json names <|endoftext|>, tokenizer_config <|im_end|>.
    let qwen = [
        source("tokenizer_config.json eos_token", &[151645]),
        source(GENERATION_CONFIG, &[151645, 151643]),
        source("config.json eos_token_id", &[151643]),
    ];
    assert!(disagreements(&qwen).is_empty());
    let llama3 = [
        source("tokenizer_config.json eos_token", &[128009]),
        source(GENERATION_CONFIG, &[128001, 128008, 128009]),
        source("config.json eos_token_id", &[128001, 128008, 128009]),
    ];
    assert!(disagreements(&llama3).is_empty());
}

#[test]
fn a_generation_config_without_the_tokenizers_eos_disagrees() {
    let d = disagreements(&[
        source("tokenizer_config.json eos_token", &[2]),
        source(GENERATION_CONFIG, &[5]),
    ]);
    assert_eq!(d.len(), 1);
    assert!(
        d[0].contains("[2] is not in generation_config.json eos_token_id [5]"),
        "{d:?}"
    );
}

#[test]
fn without_generation_config_one_source_must_hold_the_other() {
    let nested = [source("a", &[1]), source("b", &[1, 2])];
    assert!(disagreements(&nested).is_empty());
    let apart = [source("a", &[1]), source("b", &[2])];
    assert_eq!(disagreements(&apart).len(), 1);
}

#[test]
fn agreeing_sources_are_ok_and_named() {
    let c = check(
        &found(vec![
            source("tokenizer_config.json eos_token", &[2]),
            source(GENERATION_CONFIG, &[2]),
        ]),
        &facts(&[2, 0], Some(("<|im_end|>", Some(2)))),
    );
    assert_eq!(c.status, Status::Ok, "{c:?}");
    assert!(
        c.message.contains("[2 <|im_end|>, 0 <|endoftext|>]"),
        "{}",
        c.message
    );
    assert!(c.message.contains("agree"), "{}", c.message);
}

#[test]
fn an_id_outside_the_vocabulary_is_an_error_naming_source_and_id() {
    let c = check(
        &found(vec![source(GENERATION_CONFIG, &[999_999])]),
        &facts(&[2], None),
    );
    assert_eq!(c.status, Status::Error);
    assert!(
        c.message
            .contains("generation_config.json eos_token_id names [999999], outside the vocabulary"),
        "{}",
        c.message
    );
}

#[test]
fn a_disagreement_is_a_warning_and_no_eos_at_all_an_error() {
    let c = check(
        &found(vec![source("a", &[2]), source("b", &[3])]),
        &facts(&[2, 3], None),
    );
    assert_eq!(c.status, Status::Warning);
    assert!(c.fix.unwrap().contains("a wrong id ends answers early"));
    let c = check(&found(vec![]), &facts(&[], None));
    assert_eq!(c.status, Status::Error);
}

#[test]
fn a_template_turn_end_that_is_not_a_stop_id_is_a_warning() {
    let c = check(
        &found(vec![source("a", &[0])]),
        &facts(&[0], Some(("<|im_end|>", Some(2)))),
    );
    assert_eq!(c.status, Status::Warning);
    assert!(
        c.message
            .contains("<|im_end|> (id 2), which is not a stop id"),
        "{}",
        c.message
    );
}

#[test]
fn problems_reading_the_files_are_errors() {
    let mut f = found(vec![]);
    f.problems
        .push("tokenizer_config.json's eos_token \"<x>\" is not a token".into());
    let c = check(&f, &facts(&[0], None));
    assert_eq!(c.status, Status::Error);
    assert!(c.message.contains("<x>"));
}

#[test]
fn eos_token_id_fields_are_read_as_one_id_or_a_list() {
    assert_eq!(
        ids_field(&serde_json::json!({"eos_token_id": 2})),
        Some(vec![2])
    );
    assert_eq!(
        ids_field(&serde_json::json!({"eos_token_id": [1, 106]})),
        Some(vec![1, 106])
    );
    assert_eq!(ids_field(&serde_json::json!({"eos_token_id": null})), None);
    assert_eq!(ids_field(&serde_json::json!({})), None);
}
