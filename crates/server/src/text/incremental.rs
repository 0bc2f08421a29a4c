//! Incremental detokenization that never emits half a character.
//!
//! The prefix/read offset method (Hugging Face TGI, vLLM): decode a short window of already
//! emitted tokens plus the new ones, and emit only what the window grew by, once the growth no
//! longer ends in U+FFFD (which is how a byte-level decoder shows an incomplete UTF-8 sequence).
//! Decoding a window rather than single tokens keeps decoders that join tokens (spaces,
//! byte fallback) correct.

use tokenizers::Tokenizer;

#[derive(Debug, Clone)]
pub struct IncrementalDecoder {
    ids: Vec<u32>,
    /// Start of the window re-decoded as context.
    prefix_offset: usize,
    /// End of the tokens whose text has been emitted.
    read_offset: usize,
    skip_special_tokens: bool,
}

impl IncrementalDecoder {
    pub fn new(skip_special_tokens: bool) -> Self {
        Self {
            ids: Vec::new(),
            prefix_offset: 0,
            read_offset: 0,
            skip_special_tokens,
        }
    }

    /// Adds one token; returns the text that became complete (often empty mid-character).
    pub fn push(&mut self, tokenizer: &Tokenizer, id: u32) -> String {
        self.ids.push(id);
        let decode = |ids: &[u32]| {
            tokenizer
                .decode(ids, self.skip_special_tokens)
                .unwrap_or_default()
        };
        let prefix_text = decode(&self.ids[self.prefix_offset..self.read_offset]);
        let new_text = decode(&self.ids[self.prefix_offset..]);
        if new_text.len() <= prefix_text.len() || new_text.ends_with('\u{FFFD}') {
            return String::new();
        }
        let delta = if new_text.starts_with(&prefix_text) {
            new_text[prefix_text.len()..].to_string()
        } else {
            // The decoder rewrote the context (rare: a cleanup rule spanning tokens); emit the
            // part past the old length on a character boundary rather than nothing.
            let mut cut = prefix_text.len();
            while !new_text.is_char_boundary(cut) {
                cut += 1;
            }
            new_text[cut..].to_string()
        };
        self.prefix_offset = self.read_offset;
        self.read_offset = self.ids.len();
        delta
    }

    /// Text of tokens not yet emitted because they end mid-character; called at the end of a
    /// generation, where an incomplete character is all there is.
    pub fn flush(&mut self, tokenizer: &Tokenizer) -> String {
        if self.read_offset == self.ids.len() {
            return String::new();
        }
        let decode = |ids: &[u32]| {
            tokenizer
                .decode(ids, self.skip_special_tokens)
                .unwrap_or_default()
        };
        let prefix_text = decode(&self.ids[self.prefix_offset..self.read_offset]);
        let new_text = decode(&self.ids[self.prefix_offset..]);
        self.prefix_offset = self.read_offset;
        self.read_offset = self.ids.len();
        match new_text.get(prefix_text.len()..) {
            Some(rest) if new_text.starts_with(&prefix_text) => rest.to_string(),
            _ => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::byte_level_tokenizer;

    fn stream(tok: &Tokenizer, ids: &[u32], skip: bool) -> Vec<String> {
        let mut dec = IncrementalDecoder::new(skip);
        let mut out: Vec<String> = ids.iter().map(|&id| dec.push(tok, id)).collect();
        out.push(dec.flush(tok));
        out
    }

    #[test]
    fn chunks_concatenate_to_the_full_text_and_never_split_a_character() {
        let tok = byte_level_tokenizer();
        let text = "hello wörld — 日本語 🦀!";
        let ids = tok.encode(text, false).unwrap().get_ids().to_vec();
        let chunks = stream(&tok, &ids, true);
        for c in &chunks {
            assert!(
                !c.contains('\u{FFFD}'),
                "chunk {c:?} holds a broken character"
            );
        }
        assert_eq!(chunks.concat(), text);
        // The crab is 4 bytes = 4 tokens: three pushes emit nothing, the fourth emits it.
        assert!(chunks.iter().any(|c| c == "🦀"));
    }

    #[test]
    fn special_tokens_are_skipped_or_kept_on_request() {
        let tok = byte_level_tokenizer();
        let ids = tok
            .encode("hi<|im_end|>", false)
            .unwrap()
            .get_ids()
            .to_vec();
        assert_eq!(stream(&tok, &ids, true).concat(), "hi");
        assert_eq!(stream(&tok, &ids, false).concat(), "hi<|im_end|>");
    }

    #[test]
    fn an_incomplete_character_at_the_end_is_flushed() {
        let tok = byte_level_tokenizer();
        let ids = tok.encode("a€", false).unwrap().get_ids().to_vec();
        let truncated = &ids[..ids.len() - 1];
        let chunks = stream(&tok, truncated, true);
        assert_eq!(chunks[..truncated.len()].concat(), "a");
        assert_eq!(chunks.last().unwrap(), "\u{FFFD}");
    }
}
