//! A `tokenizers::Tokenizer` built from GGUF metadata (`tokenizer.ggml.*`), the way Hugging Face
//! transformers builds it from the same file (`integrations/gguf/gguf_tokenizer_mapping.py`), so
//! that both give the same token ids.

use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, PreTokenizerWrapper, SplitDelimiterBehavior, Tokenizer};

use crate::gguf::Metadata;

/// `tokenizer.ggml.token_type` values.
const TOKEN_TYPE_CONTROL: i64 = 3;
const TOKEN_TYPE_USER_DEFINED: i64 = 4;

const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const TEKKEN_SPLIT: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const GPT4O_SPLIT: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The split regex a `tokenizer.ggml.pre` name stands for; `None` means GPT-2's own
/// (ByteLevel with its built-in regex), which is what names like "smollm" and "gpt2" get.
fn split_regex(pre: &str) -> Option<&'static str> {
    Some(match pre {
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0"
        | "lfm2" | "jina-v5-nano" | "dbrx" | "smaug-bpe" => LLAMA3_SPLIT,
        "tekken" => TEKKEN_SPLIT,
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "megrez" => QWEN2_SPLIT,
        "gpt-4o" | "llama4" | "kanana2" | "talkie" | "minimax-m2" => GPT4O_SPLIT,
        _ => return None,
    })
}

#[derive(Debug, thiserror::Error)]
pub enum GgufTokenizerError {
    #[error(transparent)]
    Metadata(#[from] crate::gguf::GgufError),
    #[error("tokenizer.ggml.model `{0}` is not supported (only gpt2-style byte-level BPE is)")]
    UnsupportedModel(String),
    #[error("tokenizer.ggml.merges entry {index} (`{merge}`) is not two tokens")]
    BadMerge { index: usize, merge: String },
    #[error("tokenizer.ggml.{key} = {id} is outside the vocabulary of {vocab} tokens")]
    BadTokenId {
        key: &'static str,
        id: usize,
        vocab: usize,
    },
    #[error("cannot build the tokenizer: {0}")]
    Build(String),
}

/// GPT-2's reversible map from bytes to printable characters (`bytes_to_unicode`).
pub fn byte_to_char_table() -> [char; 256] {
    let printable = |b: u32| {
        (0x21..=0x7e).contains(&b) || (0xa1..=0xac).contains(&b) || (0xae..=0xff).contains(&b)
    };
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..256u32 {
        let code = if printable(b) {
            b
        } else {
            next += 1;
            next - 1
        };
        table[b as usize] = char::from_u32(code).unwrap_or('\u{fffd}');
    }
    table
}

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
    let model = meta.str("tokenizer.ggml.model")?;
    if model != "gpt2" {
        return Err(GgufTokenizerError::UnsupportedModel(model.to_string()));
    }
    let tokens: Vec<String> = meta
        .str_array("tokenizer.ggml.tokens")?
        .into_iter()
        .map(str::to_owned)
        .collect();
    let token_types = match meta.get("tokenizer.ggml.token_type") {
        Some(_) => meta.i64_array("tokenizer.ggml.token_type")?,
        None => Vec::new(),
    };

    let table = byte_to_char_table();
    let alphabet: std::collections::HashSet<char> = table.iter().copied().collect();
    let in_alphabet = |t: &str| t.chars().all(|c| alphabet.contains(&c));
    // Tokens are normally stored already spelled in the byte alphabet; one that is not (a raw
    // space, say) is respelled from its UTF-8 bytes, as transformers does.
    let vocab: Vocab = tokens
        .iter()
        .enumerate()
        .map(|(id, t)| {
            let spelled = if in_alphabet(t) {
                t.clone()
            } else {
                t.bytes().map(|b| table[b as usize]).collect()
            };
            (spelled, id as u32)
        })
        .collect();

    let merges = meta
        .str_array("tokenizer.ggml.merges")?
        .into_iter()
        .enumerate()
        .map(|(index, m)| {
            m.split_once(' ')
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
                .ok_or_else(|| GgufTokenizerError::BadMerge {
                    index,
                    merge: m.to_owned(),
                })
        })
        .collect::<Result<Vec<_>, _>>()?;

    let bpe = BPE::builder()
        .vocab_and_merges(vocab.clone(), merges)
        .build()
        .map_err(|e| GgufTokenizerError::Build(e.to_string()))?;
    let mut tokenizer = Tokenizer::new(bpe);

    let pre: PreTokenizerWrapper = match meta.opt_str("tokenizer.ggml.pre")?.and_then(split_regex) {
        Some(regex) => {
            let split = Split::new(
                SplitPattern::Regex(regex.to_owned()),
                SplitDelimiterBehavior::Isolated,
                false,
            )
            .map_err(|e| GgufTokenizerError::Build(e.to_string()))?;
            Sequence::new(vec![
                split.into(),
                ByteLevel::new(false, true, false).into(),
            ])
            .into()
        }
        None => ByteLevel::new(false, true, true).into(),
    };
    tokenizer.with_pre_tokenizer(Some(pre));
    tokenizer.with_decoder(Some(ByteLevelDecoder::default()));

    let typed = |wanted: i64| {
        tokens
            .iter()
            .zip(&token_types)
            .enumerate()
            .filter(move |(_, (_, &ty))| ty == wanted)
            .map(|(id, (t, _))| (id as u32, t))
    };
    // A control token spelled outside the byte alphabet is a converter mislabel; transformers
    // skips it, and so must we to get the same ids.
    let control: Vec<(u32, &String)> = typed(TOKEN_TYPE_CONTROL)
        .filter(|(_, t)| in_alphabet(t))
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
        .unwrap_or(false);

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
