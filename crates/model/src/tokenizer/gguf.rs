//! A `tokenizers::Tokenizer` built from GGUF metadata (`tokenizer.ggml.*`) the way Hugging Face
//! transformers builds it from the same file (`integrations/gguf/gguf_tokenizer_mapping.py`), so
//! that both give the same token ids. The model part depends on `tokenizer.ggml.model`: `gpt2`
//! is byte-level BPE ([`super::gguf_bpe`]), `llama` a sentencepiece vocabulary
//! ([`super::gguf_spm`]); the special tokens, the bos/eos ids and the bos post-processor are
//! common to both (here).

use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, Tokenizer};

pub use super::gguf_part::GgufTokenizerError;
use super::gguf_part::ModelPart;
use super::{gguf_bpe, gguf_spm};
use crate::gguf::Metadata;

/// `tokenizer.ggml.token_type` values.
const TOKEN_TYPE_CONTROL: i64 = 3;
const TOKEN_TYPE_USER_DEFINED: i64 = 4;

/// The tokenizer and what was read along the way.
pub struct GgufTokenizer {
    pub tokenizer: Tokenizer,
    pub tokens: Vec<String>,
    pub bos_token_id: Option<u32>,
    pub eos_token_id: Option<u32>,
    /// End-of-turn/-message ids the file names besides eos.
    pub extra_stop_ids: Vec<u32>,
    pub add_bos_token: bool,
    /// Ids of the control (special) tokens.
    pub control_ids: Vec<u32>,
}

pub fn tokenizer_from_gguf(meta: &Metadata) -> Result<GgufTokenizer, GgufTokenizerError> {
    let tokens: Vec<String> = meta
        .str_array("tokenizer.ggml.tokens")?
        .into_iter()
        .map(str::to_owned)
        .collect();
    let token_types = match meta.get("tokenizer.ggml.token_type") {
        Some(_) => meta.i64_array("tokenizer.ggml.token_type")?,
        None => Vec::new(),
    };
    let model = meta.str("tokenizer.ggml.model")?;
    let ModelPart {
        mut tokenizer,
        vocab,
        keeps_control,
        add_bos_default,
    } = match model {
        "gpt2" => gguf_bpe::byte_level(meta, &tokens)?,
        "llama" => gguf_spm::sentencepiece(meta, &tokens)?,
        other => return Err(GgufTokenizerError::UnsupportedModel(other.to_string())),
    };

    let typed = |wanted: i64| {
        tokens
            .iter()
            .zip(&token_types)
            .enumerate()
            .filter(move |(_, (_, &ty))| ty == wanted)
            .map(|(id, (t, _))| (id as u32, t))
    };
    let control: Vec<(u32, &String)> = typed(TOKEN_TYPE_CONTROL)
        .filter(|(_, t)| keeps_control(t))
        .collect();
    let specials: Vec<AddedToken> = control
        .iter()
        .map(|(_, t)| AddedToken::from(t.as_str(), true).normalized(false))
        .collect();
    tokenizer.add_special_tokens(&specials);
    let user_defined: Vec<AddedToken> = typed(TOKEN_TYPE_USER_DEFINED)
        .filter(|(_, t)| vocab.contains_key(t.as_str()))
        .map(|(_, t)| AddedToken::from(t.as_str(), false).normalized(false))
        .collect();
    tokenizer.add_tokens(&user_defined);

    let token_id = |key: &'static str| -> Result<Option<u32>, GgufTokenizerError> {
        match meta.opt_usize(&format!("tokenizer.ggml.{key}"))? {
            None => Ok(None),
            Some(id) if id < tokens.len() => Ok(Some(id as u32)),
            Some(id) => Err(GgufTokenizerError::BadTokenId {
                key,
                id,
                vocab: tokens.len(),
            }),
        }
    };
    let bos_token_id = token_id("bos_token_id")?;
    let eos_token_id = token_id("eos_token_id")?;
    let extra_stop_ids = [token_id("eot_token_id")?, token_id("eom_token_id")?]
        .into_iter()
        .flatten()
        .collect();
    let add_bos_token = meta
        .opt_bool("tokenizer.ggml.add_bos_token")?
        .unwrap_or(add_bos_default);

    if let (true, Some(bos)) = (add_bos_token, bos_token_id) {
        let bos_text = tokens[bos as usize].clone();
        let template = TemplateProcessing::builder()
            .try_single(format!("{bos_text} $A"))
            .and_then(|b| b.try_pair(format!("{bos_text} $A {bos_text} $B")))
            .map_err(GgufTokenizerError::Build)?
            .special_tokens(vec![(bos_text, bos)])
            .build()
            .map_err(|e| GgufTokenizerError::Build(e.to_string()))?;
        tokenizer.with_post_processor(Some(template));
    }

    Ok(GgufTokenizer {
        tokenizer,
        bos_token_id,
        eos_token_id,
        extra_stop_ids,
        add_bos_token,
        control_ids: control.iter().map(|(id, _)| *id).collect(),
        tokens,
    })
}
