//! Incremental detokenization that never emits half a character.
//!
//! The prefix/read offset method (Hugging Face TGI, vLLM): decode a short window of already
//! emitted tokens plus the new ones, and emit only what the window grew by, once the growth no
//! longer ends in U+FFFD (which is how a byte-level decoder shows an incomplete UTF-8 sequence).
//! Decoding a window rather than single tokens keeps decoders that join tokens (spaces,
//! byte fallback) correct.
//!
//! vLLM's `spaces_between_special_tokens: false` (with special tokens kept) writes an added
//! token that follows another added token as its bare text, without the space a decoder may
//! put before it; `true`, the default, leaves the decoder's text as it is (vLLM's fast-tokenizer
//! path, the one Hugging Face tokenizers take).

use tokenizers::Tokenizer;

#[derive(Debug, Clone)]
pub struct IncrementalDecoder {
    ids: Vec<u32>,
    /// Start of the window re-decoded as context.
    prefix_offset: usize,
    /// End of the tokens whose text has been emitted.
    read_offset: usize,
    skip_special_tokens: bool,
    /// False: no space between two added tokens (only with special tokens kept, as vLLM).
    spaces_between_special_tokens: bool,
    /// Whether the last token pushed was an added token.
    last_added: bool,
}

impl IncrementalDecoder {
    pub fn new(skip_special_tokens: bool) -> Self {
        Self {
            ids: Vec::new(),
            prefix_offset: 0,
            read_offset: 0,
            skip_special_tokens,
            spaces_between_special_tokens: true,
            last_added: false,
        }
    }

    /// vLLM's `spaces_between_special_tokens`; it matters only when special tokens are kept.
    pub fn with_spaces_between_special_tokens(mut self, spaces: bool) -> Self {
        self.spaces_between_special_tokens = spaces || self.skip_special_tokens;
        self
    }

    /// Adds one token; returns the text that became complete (often empty mid-character).
    pub fn push(&mut self, tokenizer: &Tokenizer, id: u32) -> String {
        let delta = self.push_decoded(tokenizer, id);
        if self.spaces_between_special_tokens {
            return delta;
        }
        let added = tokenizer.get_added_vocabulary().simple_id_to_token(id);
        let after_added = std::mem::replace(&mut self.last_added, added.is_some());
        match added {
            Some(content) if after_added => bare_added_token(delta, &content),
            _ => delta,
        }
    }

    fn push_decoded(&mut self, tokenizer: &Tokenizer, id: u32) -> String {
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

/// An added token's text without the whitespace a decoder put in front of it.
fn bare_added_token(delta: String, content: &str) -> String {
    match delta.strip_suffix(content) {
        Some(before) if !before.is_empty() && before.trim().is_empty() => content.to_string(),
        _ => delta,
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

    /// A tokenizer without a decoder joins its tokens with spaces (as WordPiece's decoder
    /// does), so two special tokens in a row get one between them unless the request says not.
    #[test]
    fn no_space_between_special_tokens_on_request() {
        let mut tok = byte_level_tokenizer();
        tok.with_decoder(None::<tokenizers::DecoderWrapper>);
        let ids = tok
            .encode("<|im_start|><|im_end|>", false)
            .unwrap()
            .get_ids()
            .to_vec();
        assert_eq!(ids.len(), 2);
        assert_eq!(
            stream(&tok, &ids, false).concat(),
            "<|im_start|> <|im_end|>"
        );
        let mut dec = IncrementalDecoder::new(false).with_spaces_between_special_tokens(false);
        let text: String = ids.iter().map(|&id| dec.push(&tok, id)).collect();
        assert_eq!(text, "<|im_start|><|im_end|>");
        // Skipped special tokens leave nothing to space.
        let dec = IncrementalDecoder::new(true).with_spaces_between_special_tokens(false);
        assert!(dec.spaces_between_special_tokens);
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
