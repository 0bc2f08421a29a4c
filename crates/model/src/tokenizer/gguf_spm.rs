//! The model part of a GGUF tokenizer whose `tokenizer.ggml.model` is `llama`: a sentencepiece
//! BPE vocabulary (Gemma, Llama 2, Mistral 7B), rebuilt as transformers does: the merges are
//! recovered from the vocabulary (every token cut in two pieces that are tokens themselves),
//! ranked best-first by the merged token's score; text goes in with spaces as `▁` and unknown
//! characters as byte tokens (`<0x0A>`).
//!
//! Gemma differs (transformers' `gemma_tokenizer`): its scores do not follow its merge order,
//! so the file order ranks the merges; whitespace-only tokens stored with real spaces are
//! respelled with `▁`; and no `▁` is prepended to the text. Llama-style files prepend one
//! (`tokenizer.ggml.add_space_prefix`, default true) and strip it again when decoding.

use std::collections::{HashMap, HashSet};

use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::replace::Replace;
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{DecoderWrapper, SplitDelimiterBehavior, Tokenizer};

use super::gguf_part::{GgufTokenizerError, ModelPart};
use crate::gguf::Metadata;

const SPACE: char = '\u{2581}';

fn build_err(e: impl std::fmt::Display) -> GgufTokenizerError {
    GgufTokenizerError::Build(e.to_string())
}

pub(super) fn sentencepiece(
    meta: &Metadata,
    tokens: &[String],
) -> Result<ModelPart, GgufTokenizerError> {
    let gemma = meta
        .opt_str("general.architecture")?
        .is_some_and(|a| a.starts_with("gemma"));
    let (tokens, scores): (Vec<String>, Vec<f64>) = if gemma {
        let respelled = tokens
            .iter()
            .map(|t| match t.contains(' ') && t.trim().is_empty() {
                true => SPACE.to_string().repeat(t.chars().count()),
                false => t.clone(),
            })
            .collect();
        (respelled, (0..tokens.len()).map(|i| -(i as f64)).collect())
    } else {
        let scores = meta.f32_array("tokenizer.ggml.scores")?;
        if scores.len() != tokens.len() {
            return Err(GgufTokenizerError::BadScores {
                scores: scores.len(),
                tokens: tokens.len(),
            });
        }
        (tokens.to_vec(), scores.into_iter().map(f64::from).collect())
    };
    // A token spelled twice keeps its last id and score (a Python dict built in file order).
    let vocab: Vocab = tokens
        .iter()
        .enumerate()
        .map(|(id, t)| (t.clone(), id as u32))
        .collect();
    let merges = merges_from_vocab(&tokens, &scores, &vocab);

    let mut builder = BPE::builder()
        .vocab_and_merges(vocab.clone(), merges)
        .byte_fallback(true)
        .fuse_unk(true);
    if gemma {
        builder = builder.unk_token("<unk>".into());
    }
    let mut tokenizer = Tokenizer::new(builder.build().map_err(build_err)?);
    let mut decoders: Vec<DecoderWrapper> = vec![
        Replace::new(SPACE.to_string(), " ")
            .map_err(build_err)?
            .into(),
        ByteFallback::new().into(),
        Fuse::new().into(),
    ];
    if gemma {
        tokenizer.with_normalizer(Some(
            Replace::new(" ", SPACE.to_string()).map_err(build_err)?,
        ));
        let split = Split::new(
            SplitPattern::String(" ".into()),
            SplitDelimiterBehavior::MergedWithPrevious,
            false,
        )
        .map_err(build_err)?;
        tokenizer.with_pre_tokenizer(Some(split));
    } else {
        let prefix = meta
            .opt_bool("tokenizer.ggml.add_space_prefix")?
            .unwrap_or(true);
        let scheme = match prefix {
            true => PrependScheme::First,
            false => PrependScheme::Never,
        };
        tokenizer.with_pre_tokenizer(Some(Metaspace::new(SPACE, scheme, false)));
        if prefix {
            decoders.push(Strip::new(' ', 1, 0).into());
        }
    }
    tokenizer.with_decoder(Some(DecoderSequence::new(decoders)));
    Ok(ModelPart {
        tokenizer,
        vocab,
        keeps_control: |_| true,
        // llama.cpp adds bos to a sentencepiece vocabulary whose file does not say otherwise.
        add_bos_default: true,
    })
}

/// Every (left, right) pair of tokens whose concatenation is a token, ranked by that token's
/// score (highest first), then by the longer left piece, then the longer right piece; pairs of
/// one token in (left id, right id) order. Transformers' `generate_merges`, which sorts stably,
/// so ties keep the vocabulary's order.
fn merges_from_vocab(tokens: &[String], scores: &[f64], vocab: &Vocab) -> Vec<(String, String)> {
    // Scores by token, the last spelling winning; tokens visited in first-seen order.
    let score_of: HashMap<&str, f64> = tokens
        .iter()
        .zip(scores)
        .map(|(t, &s)| (t.as_str(), s))
        .collect();
    let mut seen = HashSet::new();
    let mut ranked: Vec<(f64, usize, usize, String, String)> = Vec::new();
    for merged in tokens {
        if !seen.insert(merged.as_str()) {
            continue;
        }
        let score = score_of[merged.as_str()];
        let mut local = Vec::new();
        for (cut, _) in merged.char_indices().skip(1) {
            let (left, right) = merged.split_at(cut);
            if let (Some(&l), Some(&r)) = (vocab.get(left), vocab.get(right)) {
                local.push((l, r, left, right));
            }
        }
        local.sort_by_key(|&(l, r, _, _)| (l, r));
        for (_, _, left, right) in local {
            let (ll, rl) = (left.chars().count(), right.chars().count());
            ranked.push((score, ll, rl, left.to_owned(), right.to_owned()));
        }
    }
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)).then(b.2.cmp(&a.2)));
    ranked.into_iter().map(|(_, _, _, l, r)| (l, r)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_rank_by_the_merged_tokens_score_then_piece_lengths() {
        let tokens: Vec<String> = ["a", "b", "c", "ab", "bc", "abc"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let vocab: Vocab = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        // "bc" outranks "ab"; "abc" comes last, its split with the longer left piece first.
        let scores = [0.0, 0.0, 0.0, -2.0, -1.0, -3.0];
        let merges = merges_from_vocab(&tokens, &scores, &vocab);
        let pairs: Vec<(&str, &str)> = merges
            .iter()
            .map(|(l, r)| (l.as_str(), r.as_str()))
            .collect();
        assert_eq!(pairs, [("b", "c"), ("a", "b"), ("ab", "c"), ("a", "bc")]);
    }
}
