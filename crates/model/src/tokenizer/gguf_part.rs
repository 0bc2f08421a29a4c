//! What the GGUF tokenizer's model kinds (`gguf_bpe`, `gguf_spm`) hand to the builder that
//! adds the common parts (`gguf`): their model part, and the one error type of all three.

use tokenizers::models::bpe::Vocab;
use tokenizers::Tokenizer;

#[derive(Debug, thiserror::Error)]
pub enum GgufTokenizerError {
    #[error(transparent)]
    Metadata(#[from] crate::gguf::GgufError),
    #[error(
        "tokenizer.ggml.model `{0}` is not supported (gpt2-style byte-level BPE and llama-style \
         sentencepiece are)"
    )]
    UnsupportedModel(String),
    #[error("tokenizer.ggml.merges entry {index} (`{merge}`) is not two tokens")]
    BadMerge { index: usize, merge: String },
    #[error("tokenizer.ggml.{key} = {id} is outside the vocabulary of {vocab} tokens")]
    BadTokenId {
        key: &'static str,
        id: usize,
        vocab: usize,
    },
    #[error("tokenizer.ggml.scores has {scores} entries for {tokens} tokens")]
    BadScores { scores: usize, tokens: usize },
    #[error("cannot build the tokenizer: {0}")]
    Build(String),
}

/// What a model kind contributes: its tokenizer without special tokens, the vocabulary as the
/// model spells it, and which control tokens become special tokens.
pub struct ModelPart {
    pub tokenizer: Tokenizer,
    pub vocab: Vocab,
    /// False for a control token transformers skips (a converter mislabel).
    pub keeps_control: fn(&str) -> bool,
    /// Whether prompts start with bos when the file does not say.
    pub add_bos_default: bool,
}
