//! A tokenizer that needs no file, for `--load-format dummy` without `--tokenizer`: byte-level
//! BPE with one token per byte (ids 0..=255, GPT-2's byte-to-character map) and no merges,
//! plus ChatML's special tokens and chat template, so every API route works on random weights.

use super::{byte_to_char_table, stop_ids, LoadedTokenizer};

const SPECIALS: [&str; 3] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];

const CHATML_TEMPLATE: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] \
+ '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}\
{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// Ids used: 0..=258, so any model with a vocabulary of at least 259 can run it.
pub const SYNTHETIC_VOCAB: usize = 256 + SPECIALS.len();

pub fn synthetic_byte_tokenizer() -> anyhow::Result<LoadedTokenizer> {
    let mut vocab = serde_json::Map::new();
    for (id, c) in byte_to_char_table().iter().enumerate() {
        vocab.insert(c.to_string(), serde_json::json!(id));
    }
    let added: Vec<_> = SPECIALS
        .iter()
        .enumerate()
        .map(|(i, s)| {
            serde_json::json!({"id": 256 + i, "content": s, "single_word": false,
                "lstrip": false, "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    let json = serde_json::json!({
        "version": "1.0",
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
            "use_regex": true},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true,
            "use_regex": true},
        "model": {"type": "BPE", "vocab": vocab, "merges": [], "dropout": null,
            "unk_token": null, "continuing_subword_prefix": null, "end_of_word_suffix": null,
            "fuse_unk": false, "byte_fallback": false, "ignore_merges": false}
    });
    let tokenizer = tokenizers::Tokenizer::from_bytes(json.to_string().as_bytes())
        .map_err(|e| anyhow::anyhow!("building the synthetic tokenizer: {e}"))?;
    let eos_token_ids = stop_ids(&tokenizer, tokenizer.token_to_id("<|im_end|>"));
    Ok(LoadedTokenizer {
        tokenizer,
        chat_template: Some(CHATML_TEMPLATE.to_string()),
        bos_token: None,
        eos_token: Some("<|im_end|>".to_string()),
        eos_token_ids,
        add_bos_token: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_any_text_byte_by_byte() {
        let t = synthetic_byte_tokenizer().unwrap();
        let text = "héllo, wörld ✓ <|im_end|>";
        let ids = t.tokenizer.encode(text, false).unwrap().get_ids().to_vec();
        assert!(ids.iter().all(|&i| (i as usize) < SYNTHETIC_VOCAB));
        assert!(ids.contains(&258), "special token is one id: {ids:?}");
        assert_eq!(t.tokenizer.decode(&ids, false).unwrap(), text);
        assert_eq!(ids.len(), "héllo, wörld ✓ ".len() + 1);
        assert_eq!(t.eos_token_ids[0], 258);
        assert!(t.eos_token_ids.contains(&256));
    }
}
