//! Token ids against Hugging Face transformers loading the same GGUF
//! (fixtures/tokenizer, made by scripts/make_tokenizer_fixtures.py).

use super::*;
use crate::gguf::GgufFile;
use crate::testing::{model_path, repo_root, GEMMA3_270M, QWEN_05B, SMOLLM2};

fn fixture(name: &str) -> serde_json::Value {
    let path = repo_root().join(format!("fixtures/tokenizer/{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run scripts/make_tokenizer_fixtures.py)",
            path.display()
        )
    });
    serde_json::from_str(&text).unwrap()
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn check_against_transformers(model_file: &str, fixture_name: &str) -> LoadedTokenizer {
    let file = GgufFile::open(&model_path(model_file)).unwrap();
    let loaded = LoadedTokenizer::from_gguf_metadata(file.metadata()).unwrap();
    let fx = fixture(fixture_name);
    assert_eq!(loaded.bos_token.as_deref(), fx["bos_token"].as_str());
    assert_eq!(loaded.eos_token.as_deref(), fx["eos_token"].as_str());
    assert_eq!(
        loaded.tokenizer.get_vocab_size(true) as u64,
        fx["vocab_size"].as_u64().unwrap()
    );

    let mut mismatches = vec![];
    for case in fx["tokenize"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let add_special = case["add_special_tokens"].as_bool().unwrap();
        let got = loaded
            .tokenizer
            .encode(text, add_special)
            .unwrap()
            .get_ids()
            .to_vec();
        let want = ids(&case["ids"]);
        if got != want {
            mismatches.push(format!(
                "{text:?} (special {add_special}):\n  ferrite {got:?}\n  hf      {want:?}"
            ));
        }
    }
    for case in fx["decode"].as_array().unwrap() {
        let skip = case["skip_special_tokens"].as_bool().unwrap();
        let got = loaded.tokenizer.decode(&ids(&case["ids"]), skip).unwrap();
        let want = case["text"].as_str().unwrap();
        if got != want {
            mismatches.push(format!(
                "decode (skip {skip}):\n  ferrite {got:?}\n  hf      {want:?}"
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    loaded
}

#[test]
fn smollm2_matches_transformers() {
    let t = check_against_transformers(SMOLLM2, "smollm2");
    assert!(!t.add_bos_token);
    assert!(t
        .chat_template
        .as_deref()
        .is_some_and(|s| s.contains("<|im_start|>")));
    // eos <|im_end|> (2) first, then <|endoftext|> (0).
    assert_eq!(t.eos_token_ids, vec![2, 0]);
}

#[test]
fn qwen_matches_transformers() {
    let t = check_against_transformers(QWEN_05B, "qwen2.5-coder-0.5b");
    assert!(!t.add_bos_token);
    assert!(t
        .chat_template
        .as_deref()
        .is_some_and(|s| s.contains("<|im_start|>")));
    assert_eq!(t.eos_token_ids, vec![151645, 151643]);
}

/// A sentencepiece vocabulary (`tokenizer.ggml.model = llama`), Gemma's flavour: merges
/// recovered from 262,144 tokens in file order, `▁` for spaces, byte fallback, bos added.
#[test]
fn gemma3_sentencepiece_matches_transformers() {
    let started = std::time::Instant::now();
    let t = check_against_transformers(GEMMA3_270M, "gemma3-270m");
    println!(
        "gemma3 tokenizer built and checked in {:?}",
        started.elapsed()
    );
    assert!(t.add_bos_token);
    // The base model's file has no chat template.
    assert!(t.chat_template.is_none());
    // eos <eos> (1), then <end_of_turn> (106), which ends a chat turn.
    assert_eq!(t.eos_token_ids, vec![1, 106]);
}

#[test]
fn byte_alphabet_is_gpt2s() {
    let table = byte_to_char_table();
    // Known values from GPT-2's bytes_to_unicode: printable ASCII maps to itself, space to
    // U+0120 ('Ġ'), newline to U+010A ('Ċ'), 0xAD to U+0143.
    assert_eq!(table[b'A' as usize], 'A');
    assert_eq!(table[b' ' as usize], 'Ġ');
    assert_eq!(table[b'\n' as usize], 'Ċ');
    assert_eq!(table[0xad], '\u{143}');
    let distinct: std::collections::HashSet<char> = table.iter().copied().collect();
    assert_eq!(distinct.len(), 256);
}

#[test]
fn harmony_vocabularies_do_not_stop_at_the_end_of_a_message() {
    let path = repo_root()
        .join("crates/server/tests/fixtures/harmony/o200k_harmony_subset.tokenizer.json");
    let tokenizer = tokenizers::Tokenizer::from_file(path).unwrap();
    // gpt-oss's generation_config.json: `<|return|>`, `<|endoftext|>`, `<|call|>`.
    let ids = stop_ids(&tokenizer, [200_002, 199_999, 200_012]);
    assert_eq!(ids, [200_002, 199_999, 200_012]);
    assert!(!stop_ids(&tokenizer, [200_007]).contains(&200_007));
}
