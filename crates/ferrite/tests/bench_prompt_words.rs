//! `ferrite bench` sizes prompts without a tokenizer by counting words, which is exact only if
//! every word of its list is one token (with its leading space) for the models it is used with.
//! The models' own tokenizers are the oracle.

use std::path::PathBuf;

use ferrite_bench::text::{random_text, WORDS};
use ferrite_bench::WordCounter;
use ferrite_model::gguf::GgufFile;
use ferrite_model::tokenizer::LoadedTokenizer;
use rand::rngs::StdRng;
use rand::SeedableRng;

fn tokenizer(file: &str) -> tokenizers::Tokenizer {
    let dir = match std::env::var_os("FERRITE_MODELS") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/ferrite/models"),
    };
    let path = dir.join(file);
    assert!(
        path.is_file(),
        "{} is missing: run scripts/fetch_models.sh",
        path.display()
    );
    let gguf = GgufFile::open(&path).unwrap();
    LoadedTokenizer::from_gguf_metadata(gguf.metadata())
        .unwrap()
        .tokenizer
}

fn check(file: &str) {
    let tok = tokenizer(file);
    let count = |text: &str| tok.encode(text, false).unwrap().len();
    let split: Vec<&&str> = WORDS
        .iter()
        .filter(|w| count(&format!("the {w}")) != 2)
        .collect();
    assert!(
        split.is_empty(),
        "{file}: words of more than one token: {split:?}"
    );
    let mut rng = StdRng::seed_from_u64(3);
    for n in [1, 100, 1000] {
        assert_eq!(count(&random_text(&mut rng, n, &WordCounter)), n, "{file}");
    }
}

#[test]
fn bench_prompt_words_are_single_tokens_for_smollm2() {
    check("SmolLM2-135M-Instruct.Q4_1.gguf");
}

#[test]
fn bench_prompt_words_are_single_tokens_for_qwen2_5() {
    check("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
}
