//! The text and raw bytes of single tokens, for logprobs (`token`, `bytes`, `tokens`).
//!
//! Decoding one token alone turns half a UTF-8 character into U+FFFD; with a byte-level BPE
//! (GPT-2 style: SmolLM2, Qwen) the vocabulary string maps back to the exact bytes instead.

use std::collections::HashMap;

use tokenizers::Tokenizer;

/// One token as logprobs report it.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenText {
    pub id: u32,
    /// The bytes read as UTF-8 (lossy where the token holds part of a character).
    pub text: String,
    pub bytes: Vec<u8>,
}

pub struct TokenTexts {
    /// `Some` when the tokenizer's decoder is byte-level: vocabulary char -> byte.
    byte_of_char: Option<HashMap<char, u8>>,
}

impl TokenTexts {
    pub fn new(tokenizer: &Tokenizer) -> Self {
        let byte_level = tokenizer
            .get_decoder()
            .and_then(|d| serde_json::to_string(d).ok())
            .is_some_and(|json| json.contains("\"ByteLevel\""));
        Self {
            byte_of_char: byte_level.then(gpt2_byte_decoder),
        }
    }

    pub fn get(&self, tokenizer: &Tokenizer, id: u32) -> TokenText {
        let bytes = self.raw_bytes(tokenizer, id).unwrap_or_else(|| {
            tokenizer
                .decode(&[id], false)
                .unwrap_or_default()
                .into_bytes()
        });
        TokenText {
            id,
            text: String::from_utf8_lossy(&bytes).into_owned(),
            bytes,
        }
    }

    /// Every token's bytes, special tokens empty (as llama.cpp renders them without
    /// specials): what the `infill` sampler compares.
    pub fn all_pieces(&self, tokenizer: &Tokenizer, vocab_size: usize) -> Vec<Vec<u8>> {
        let added = tokenizer.get_added_tokens_decoder();
        (0..vocab_size as u32)
            .map(|id| match added.get(&id) {
                Some(token) if token.special => Vec::new(),
                _ => self.get(tokenizer, id).bytes,
            })
            .collect()
    }

    fn raw_bytes(&self, tokenizer: &Tokenizer, id: u32) -> Option<Vec<u8>> {
        let table = self.byte_of_char.as_ref()?;
        let piece = tokenizer.id_to_token(id)?;
        piece.chars().map(|c| table.get(&c).copied()).collect()
    }
}

/// The inverse of GPT-2's `bytes_to_unicode`: printable bytes stand for themselves, the other
/// 68 are shifted to U+0100 and up, in byte order.
fn gpt2_byte_decoder() -> HashMap<char, u8> {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut table = HashMap::with_capacity(256);
    let mut shifted = 0u32;
    for b in 0..=255u8 {
        let c = if printable(b) {
            char::from(b)
        } else {
            shifted += 1;
            char::from_u32(255 + shifted).unwrap_or(char::REPLACEMENT_CHARACTER)
        };
        table.insert(c, b);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::byte_level_tokenizer;

    #[test]
    fn gpt2_table_is_a_bijection_with_known_anchors() {
        let table = gpt2_byte_decoder();
        assert_eq!(table.len(), 256);
        // Known from GPT-2's vocabulary: 'Ġ' is the space, 'Ċ' the newline.
        assert_eq!(table[&'Ġ'], b' ');
        assert_eq!(table[&'Ċ'], b'\n');
        assert_eq!(table[&'A'], b'A');
    }

    #[test]
    fn a_token_holding_half_a_character_reports_its_bytes() {
        let tok = byte_level_tokenizer();
        let texts = TokenTexts::new(&tok);
        let ids = tok.encode("é", false).unwrap().get_ids().to_vec();
        assert_eq!(ids.len(), 2, "the test tokenizer has byte tokens only");
        let first = texts.get(&tok, ids[0]);
        assert_eq!(first.bytes, vec![0xC3]);
        assert_eq!(first.text, "\u{FFFD}");
        let special = texts.get(&tok, tok.token_to_id("<|im_end|>").unwrap());
        assert_eq!(special.text, "<|im_end|>");
    }
}
