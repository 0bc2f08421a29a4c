//! Chat prompts through the server's tokenizer workers must give the token ids transformers'
//! `apply_chat_template(..., tokenize=True)` gives (fixtures/reference/*.json, made by
//! scripts/make_reference_fixtures.py).

use std::path::PathBuf;

use ferrite_model::gguf::GgufFile;
use ferrite_model::tokenizer::LoadedTokenizer;
use ferrite_server::{ChatRenderer, HarmonySystem, TextModel, TokenizerPool};
use serde_json::Value;

fn models_dir() -> PathBuf {
    match std::env::var_os("FERRITE_MODELS") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/ferrite/models"),
    }
}

fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/reference")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

async fn check(fixture_name: &str) {
    let fx = fixture(fixture_name);
    let file = fx["model_file"].as_str().unwrap();
    let path = models_dir().join(file);
    assert!(
        path.is_file(),
        "{} is missing: run scripts/fetch_models.sh",
        path.display()
    );
    let gguf = GgufFile::open(&path).unwrap();
    let tok = LoadedTokenizer::from_gguf_metadata(gguf.metadata()).unwrap();
    let model = TextModel {
        tokenizer: tok.tokenizer.clone(),
        chat_template: tok.chat_template.clone(),
        bos_token: tok.bos_token.clone(),
        eos_token: tok.eos_token.clone(),
        chat_renderer: ChatRenderer::Auto,
        harmony: HarmonySystem::default(),
    };
    let pool = TokenizerPool::new(&model, 1).unwrap();
    let cases = fx["chat"].as_array().unwrap();
    assert!(!cases.is_empty());
    for case in cases {
        let messages = case["messages"].as_array().unwrap().clone();
        let add_generation_prompt = case["add_generation_prompt"].as_bool().unwrap();
        let got = pool
            .render_chat(messages, add_generation_prompt)
            .await
            .unwrap();
        assert_eq!(
            got.text,
            case["rendered"].as_str().unwrap(),
            "{fixture_name}: {}",
            case["name"]
        );
        let want: Vec<u32> = serde_json::from_value(case["ids"].clone()).unwrap();
        assert_eq!(got.ids, want, "{fixture_name}: {}", case["name"]);
    }
}

#[tokio::test]
async fn smollm2_chat_ids_match_transformers() {
    check("smollm2.json").await;
}

#[tokio::test]
async fn qwen_chat_ids_match_transformers() {
    check("qwen2.5-coder-0.5b.json").await;
}
