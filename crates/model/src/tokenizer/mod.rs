//! The tokenizer a model comes with, from GGUF metadata or a Hugging Face `tokenizer.json`, with
//! what the server needs besides the ids: the chat template and the stop tokens.

mod gguf;
mod gguf_bpe;
mod gguf_part;
mod gguf_spm;
mod hf_files;
mod synthetic;

pub use gguf::{tokenizer_from_gguf, GgufTokenizer, GgufTokenizerError};
pub use gguf_bpe::byte_to_char_table;
pub use hf_files::{tokenizer_from_hf_dir, HfTokenizerError};
pub use synthetic::{synthetic_byte_tokenizer, SYNTHETIC_VOCAB};

use crate::gguf::{GgufError, Metadata};

/// Tokens that end a turn in the chat formats of the supported families: a model may emit any of
/// these instead of its nominal eos, and llama.cpp stops on them too.
const END_OF_GENERATION_TOKENS: &[&str] = &[
    "<|endoftext|>",
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end|>",
    "<end_of_turn>",
    "<|end_of_text|>",
];

#[derive(Clone)]
pub struct LoadedTokenizer {
    pub tokenizer: tokenizers::Tokenizer,
    /// Jinja source of the model's chat template.
    pub chat_template: Option<String>,
    pub bos_token: Option<String>,
    pub eos_token: Option<String>,
    /// Every id generation stops on: eos, plus end-of-turn tokens such as `<|im_end|>`.
    pub eos_token_ids: Vec<u32>,
    /// Whether prompts start with bos (already applied by `tokenizer.encode(text, true)`).
    pub add_bos_token: bool,
}

impl std::fmt::Debug for LoadedTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedTokenizer")
            .field("vocab", &self.tokenizer.get_vocab_size(true))
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .field("eos_token_ids", &self.eos_token_ids)
            .field("add_bos_token", &self.add_bos_token)
            .finish_non_exhaustive()
    }
}

/// The stop ids: the given ones first (eos first of all), then end-of-turn tokens the vocabulary
/// has, each once. In gpt-oss's harmony vocabulary (o200k_harmony: it has `<|return|>` and
/// `<|call|>`, which end its turns) `<|end|>` ends a message within the turn, as after the
/// analysis: never a stop id there (llama.cpp drops it from such vocabularies' end tokens too).
fn stop_ids(tokenizer: &tokenizers::Tokenizer, given: impl IntoIterator<Item = u32>) -> Vec<u32> {
    let harmony = ["<|return|>", "<|call|>"]
        .iter()
        .all(|t| tokenizer.token_to_id(t).is_some());
    let message_end = tokenizer.token_to_id("<|end|>").filter(|_| harmony);
    let mut ids: Vec<u32> = Vec::new();
    let known = END_OF_GENERATION_TOKENS
        .iter()
        .filter_map(|t| tokenizer.token_to_id(t));
    for id in given.into_iter().chain(known) {
        if !ids.contains(&id) && Some(id) != message_end {
            ids.push(id);
        }
    }
    ids
}

impl LoadedTokenizer {
    pub fn from_gguf_metadata(meta: &Metadata) -> Result<LoadedTokenizer, GgufTokenizerError> {
        let built = tokenizer_from_gguf(meta)?;
        let name = |id: Option<u32>| id.map(|i| built.tokens[i as usize].clone());
        let eos_token_ids = stop_ids(
            &built.tokenizer,
            built.eos_token_id.into_iter().chain(built.extra_stop_ids),
        );
        Ok(LoadedTokenizer {
            chat_template: meta
                .opt_str("tokenizer.chat_template")
                .map_err(GgufError::from)?
                .map(str::to_owned),
            bos_token: name(built.bos_token_id),
            eos_token: name(built.eos_token_id),
            eos_token_ids,
            add_bos_token: built.add_bos_token,
            tokenizer: built.tokenizer,
        })
    }
}

#[cfg(test)]
mod tests;
