//! The model part of a GGUF tokenizer whose `tokenizer.ggml.model` is `gpt2`: byte-level BPE
//! from the file's tokens and merges, with the split regex its `tokenizer.ggml.pre` names.

use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{PreTokenizerWrapper, SplitDelimiterBehavior, Tokenizer};

use super::gguf_part::{GgufTokenizerError, ModelPart};
use crate::gguf::Metadata;

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

/// Whether every character of `token` is in the byte alphabet: tokens are normally stored
/// already spelled in it. A control token outside it is a converter mislabel that transformers
/// skips (adding it would grow the vocabulary past the model's).
fn in_alphabet(token: &str) -> bool {
    // The printable bytes stand for themselves; the 68 others for U+0100..=U+0143.
    token.chars().all(|c| {
        let u = c as u32;
        (0x21..=0x7e).contains(&u) || (0xa1..=0xac).contains(&u) || (0xae..=0x143).contains(&u)
    })
}

pub(super) fn byte_level(
    meta: &Metadata,
    tokens: &[String],
) -> Result<ModelPart, GgufTokenizerError> {
    let table = byte_to_char_table();
    // A token not spelled in the byte alphabet (a raw space, say) is respelled from its UTF-8
    // bytes, as transformers does.
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
    Ok(ModelPart {
        tokenizer,
        vocab,
        keeps_control: in_alphabet,
        add_bos_default: false,
    })
}
