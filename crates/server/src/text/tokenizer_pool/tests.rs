//! The tokenizer workers: rendering, tokenizing, the native harmony renderer, request templates.

use super::*;
use crate::testing::byte_level_tokenizer;
use serde_json::json;

fn model() -> TextModel {
    TextModel {
        tokenizer: byte_level_tokenizer(),
        chat_template: Some(
            "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}".into(),
        ),
        bos_token: None,
        eos_token: Some("<|im_end|>".into()),
        chat_renderer: ChatRenderer::Auto,
        harmony: HarmonySystem::default(),
    }
}

#[tokio::test]
async fn chat_prompts_parse_special_tokens_in_the_rendered_text() {
    let pool = TokenizerPool::new(&model(), 2).unwrap();
    let tok = byte_level_tokenizer();
    let p = pool
        .render_chat(vec![json!({"role": "user", "content": "hi"})], false)
        .await
        .unwrap();
    assert_eq!(p.text, "<|im_start|>user\nhi<|im_end|>\n");
    let start = tok.token_to_id("<|im_start|>").unwrap();
    let end = tok.token_to_id("<|im_end|>").unwrap();
    assert_eq!(p.ids.first(), Some(&start));
    assert!(p.ids.contains(&end));
    assert_eq!(tok.decode(&p.ids, false).unwrap(), p.text);
}

#[tokio::test]
async fn a_chat_prompt_gets_the_tokenizers_special_tokens_only_when_asked() {
    let mut model = model();
    let bos = model.tokenizer.token_to_id("<|endoftext|>").unwrap();
    // A BOS in front of every text, as Llama's tokenizers add.
    let processor: tokenizers::PostProcessorWrapper = serde_json::from_value(json!({
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}],
        "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [bos],
            "tokens": ["<|endoftext|>"]}}}))
    .unwrap();
    model.tokenizer.with_post_processor(Some(processor));
    let pool = TokenizerPool::new(&model, 1).unwrap();
    let mut inputs = ChatInputs::new(vec![json!({"role": "user", "content": "hi"})], false);
    let plain = pool.render_chat_inputs(inputs.clone()).await.unwrap();
    inputs.add_special_tokens = true;
    let with = pool.render_chat_inputs(inputs).await.unwrap();
    assert_eq!(with.ids[0], bos);
    assert_eq!(with.ids[1..], plain.ids[..]);
    let literal = literal_tokenizer(&model.tokenizer);
    assert_eq!(
        with_special_tokens(&literal, plain.ids.clone()).unwrap(),
        with.ids
    );
}

#[tokio::test]
async fn many_concurrent_jobs_all_get_their_own_answer() {
    let pool = TokenizerPool::new(&model(), 2).unwrap();
    let jobs = (0..50).map(|i| {
        let pool = pool.clone();
        async move { (i, pool.encode(format!("n{i}"), false).await.unwrap()) }
    });
    let tok = byte_level_tokenizer();
    for (i, ids) in futures::future::join_all(jobs).await {
        assert_eq!(tok.decode(&ids, false).unwrap(), format!("n{i}"));
    }
}

#[tokio::test]
async fn a_harmony_template_gets_the_native_renderer_unless_the_flag_says_template() {
    let tokenizer = Tokenizer::from_bytes(include_str!(
        "../../../tests/fixtures/harmony/o200k_harmony_subset.tokenizer.json"
    ))
    .unwrap();
    let mut model = TextModel {
        tokenizer,
        chat_template: Some("{{ '<|channel|>' }}template".into()),
        bos_token: None,
        eos_token: None,
        chat_renderer: ChatRenderer::Auto,
        harmony: HarmonySystem {
            date: Some("2026-01-02".into()),
        },
    };
    let hi = || vec![json!({"role": "user", "content": "Hi!"})];
    let pool = TokenizerPool::new(&model, 1).unwrap();
    let p = pool.render_chat(hi(), true).await.unwrap();
    assert!(p.text.contains("Current date: 2026-01-02\n"), "{}", p.text);
    assert!(p
        .text
        .ends_with("<|start|>user<|message|>Hi!<|end|><|start|>assistant"));
    assert_eq!(p.ids.first(), Some(&200006), "<|start|>");
    let mut bad = vec![json!({"role": "tool", "tool_call_id": "x", "content": "r"})];
    bad.extend(hi());
    let err = pool.render_chat(bad, true).await.unwrap_err();
    assert_eq!(err.param.as_deref(), Some("messages"));
    model.chat_renderer = ChatRenderer::Template;
    let pool = TokenizerPool::new(&model, 1).unwrap();
    assert_eq!(
        pool.render_chat(hi(), true).await.unwrap().text,
        "<|channel|>template"
    );
}

#[tokio::test]
async fn no_template_is_a_400() {
    let mut m = model();
    m.chat_template = None;
    let pool = TokenizerPool::new(&m, 1).unwrap();
    let err = pool.render_chat(vec![], true).await.unwrap_err();
    assert_eq!(err.status, 400);
}

#[tokio::test]
async fn a_request_template_replaces_the_models_and_is_kept_compiled() {
    let pool = TokenizerPool::new(&model(), 1).unwrap();
    let hi = || vec![json!({"role": "user", "content": "hi"})];
    let mut inputs = ChatInputs::new(hi(), true);
    inputs.template = Some("[{{ messages[0].content }}|{{ documents[0].title }}]".into());
    inputs
        .extra_vars
        .insert("documents".into(), json!([{"title": "T", "text": "x"}]));
    // Five distinct templates through a cache of four, then the first again.
    for round in 0..6 {
        let mut inputs = inputs.clone();
        let tag = round % 5;
        inputs.template = Some(format!("{tag}:{}", inputs.template.unwrap()));
        let p = pool.render_chat_inputs(inputs).await.unwrap();
        assert_eq!(p.text, format!("{tag}:[hi|T]"));
    }
    // The model's own template is untouched.
    let p = pool.render_chat(hi(), true).await.unwrap();
    assert_eq!(p.text, "<|im_start|>user\nhi<|im_end|>\n");
    inputs.template = Some("{% for %}".into());
    let err = pool.render_chat_inputs(inputs).await.unwrap_err();
    assert_eq!(err.status, 400);
    assert_eq!(err.param.as_deref(), Some("chat_template"));
}

#[test]
fn the_kept_templates_are_the_last_four_used() {
    let mut kept = Vec::new();
    let specials = (None, None);
    for src in ["a", "b", "c", "d", "a", "e"] {
        request_template(&mut kept, src, &specials).unwrap();
    }
    let names: Vec<&str> = kept.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(names, ["c", "d", "a", "e"]);
}
