//! A small byte-level BPE tokenizer for unit tests: one token per byte, a few merges, and the
//! ChatML special tokens, so tests exercise multi-byte characters split across tokens.

use tokenizers::Tokenizer;

pub fn byte_level_tokenizer() -> Tokenizer {
    let byte_chars = gpt2_chars();
    let mut vocab = serde_json::Map::new();
    for (i, c) in byte_chars.iter().enumerate() {
        vocab.insert(c.to_string(), serde_json::json!(i));
    }
    // Merges make multi-byte tokens too ("he", "ll", "hell", "Ġw"), as real vocabularies have.
    let merges = ["h e", "l l", "he ll", "Ġ w"];
    for m in merges {
        let token: String = m.split(' ').collect();
        let next = vocab.len();
        vocab.insert(token, serde_json::json!(next));
    }
    let specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];
    let added: Vec<_> = specials
        .iter()
        .enumerate()
        .map(|(i, s)| {
            serde_json::json!({"id": vocab.len() + i, "content": s, "single_word": false,
                "lstrip": false, "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    let json = serde_json::json!({
        "version": "1.0",
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "vocab": vocab, "merges": merges, "dropout": null,
            "unk_token": null, "continuing_subword_prefix": null, "end_of_word_suffix": null,
            "fuse_unk": false, "byte_fallback": false, "ignore_merges": false}
    });
    Tokenizer::from_bytes(json.to_string().as_bytes()).unwrap()
}

fn gpt2_chars() -> Vec<char> {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut shifted = 0u32;
    (0..=255u8)
        .map(|b| {
            if printable(b) {
                char::from(b)
            } else {
                shifted += 1;
                char::from_u32(255 + shifted).unwrap()
            }
        })
        .collect()
}
