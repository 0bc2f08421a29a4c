//! A request's logit rules made concrete for the model (`openai/logit_fields.rs` read them):
//! `bad_words` tokenized as vLLM tokenizes them, every token id held to the vocabulary, and
//! `min_tokens` to the `max_tokens` the request ends up with.

use ferrite_engine::LogitRules;

use crate::error::ApiError;
use crate::text::tokenizer_pool::TokenizerPool;

/// vLLM's `SamplingParams.update_from_tokenizer`: each word, its leading whitespace stripped,
/// is tokenized without special tokens as it is (a word at the start of the text) and after
/// a space (a word mid-text); the spaced form counts too when it starts with another token
/// and has as many tokens.
pub async fn tokenize_bad_words(
    tokenizers: &TokenizerPool,
    words: &[String],
) -> Result<Vec<Vec<u32>>, ApiError> {
    let mut sequences = Vec::with_capacity(words.len() * 2);
    for word in words {
        let word = word.trim_start();
        let plain = tokenizers.encode(word.to_string(), false).await?;
        let spaced = tokenizers.encode(format!(" {word}"), false).await?;
        sequences.extend(word_forms(plain, spaced));
    }
    Ok(sequences)
}

/// The token sequences one bad word bans, from its plain and its spaced tokenization.
fn word_forms(plain: Vec<u32>, spaced: Vec<u32>) -> Vec<Vec<u32>> {
    let new_word = plain.first() != spaced.first() && plain.len() == spaced.len();
    let mut forms = vec![plain];
    if new_word {
        forms.push(spaced);
    }
    forms.retain(|f| !f.is_empty());
    forms
}

/// Every token id the rules name must be in the vocabulary (vLLM's 400s for `logit_bias` and
/// `allowed_token_ids`; a bad word's ids come from the tokenizer, and are checked all the same).
pub fn check_vocabulary(rules: &LogitRules, vocab_size: usize) -> Result<(), ApiError> {
    let allowed = rules.allowed_token_ids.iter().flatten().copied();
    let fields = [
        (
            "logit_bias",
            first_outside(rules.logit_bias.iter().map(|b| b.0), vocab_size),
        ),
        ("allowed_token_ids", first_outside(allowed, vocab_size)),
        (
            "bad_words",
            first_outside(rules.bad_words.iter().flatten().copied(), vocab_size),
        ),
    ];
    for (param, outside) in fields {
        if let Some(token) = outside {
            return Err(ApiError::invalid_param(
                param,
                format!(
                    "token id {token} in {param} is out of range (vocabulary size {vocab_size})"
                ),
            ));
        }
    }
    Ok(())
}

fn first_outside(mut ids: impl Iterator<Item = u32>, vocab_size: usize) -> Option<u32> {
    ids.find(|&t| t as usize >= vocab_size)
}

/// vLLM's rule: `min_tokens` may not exceed `max_tokens` (the one the request runs with: its
/// own, or the default when it sent none).
pub fn check_min_tokens(rules: &LogitRules, max_tokens: usize) -> Result<(), ApiError> {
    if rules.min_tokens > max_tokens {
        return Err(ApiError::invalid_param(
            "min_tokens",
            format!(
                "min_tokens ({}) must be less than or equal to max_tokens ({max_tokens})",
                rules.min_tokens
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spaced_form_counts_only_when_it_is_another_word_of_as_many_tokens() {
        // "hello" / " hello": two different one-token words.
        assert_eq!(word_forms(vec![5], vec![9]), vec![vec![5], vec![9]]);
        // The space tokenized on its own: the spaced form only adds a space token.
        assert_eq!(word_forms(vec![5, 6], vec![1, 5, 6]), vec![vec![5, 6]]);
        // The same first token: nothing new.
        assert_eq!(word_forms(vec![5, 6], vec![5, 7]), vec![vec![5, 6]]);
        assert_eq!(word_forms(vec![], vec![3]), Vec::<Vec<u32>>::new());
    }

    #[test]
    fn ids_outside_the_vocabulary_name_their_field() {
        let ok = LogitRules {
            logit_bias: vec![(9, 1.0)],
            allowed_token_ids: Some(vec![0, 9]),
            bad_words: vec![vec![3, 9]],
            ..LogitRules::default()
        };
        assert!(check_vocabulary(&ok, 10).is_ok());
        for (rules, param) in [
            (
                LogitRules {
                    logit_bias: vec![(10, 1.0)],
                    ..ok.clone()
                },
                "logit_bias",
            ),
            (
                LogitRules {
                    allowed_token_ids: Some(vec![1, 12]),
                    ..ok.clone()
                },
                "allowed_token_ids",
            ),
            (
                LogitRules {
                    bad_words: vec![vec![10]],
                    ..ok.clone()
                },
                "bad_words",
            ),
        ] {
            let e = check_vocabulary(&rules, 10).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param));
        }
    }

    #[test]
    fn min_tokens_may_not_exceed_max_tokens() {
        let rules = LogitRules {
            min_tokens: 5,
            ..LogitRules::default()
        };
        assert!(check_min_tokens(&rules, 5).is_ok());
        let e = check_min_tokens(&rules, 4).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("min_tokens"));
    }
}
