//! The vocabulary check: every id the tokenizer can produce has a row in the model's embedding
//! (and its LM head scores it). Fewer tokenizer ids than rows is common (rows padded to a
//! multiple of 64 or 128); more means the tokenizer is not the model's.

use tokenizers::Tokenizer;

use super::report::Check;

const NAME: &str = "vocabulary";

/// The ids the tokenizer can produce: one past the largest (added tokens included).
pub fn tokenizer_ids(tokenizer: &Tokenizer) -> usize {
    tokenizer
        .get_vocab(true)
        .values()
        .max()
        .map_or(0, |&id| id as usize + 1)
}

/// `embedding_rows`: the token embedding's first dimension as stored; `config_vocab`: the
/// vocabulary size the model's config declares.
pub fn check(tokenizer_ids: usize, embedding_rows: usize, config_vocab: usize) -> Check {
    let mut errors = Vec::new();
    if tokenizer_ids > embedding_rows {
        errors.push(format!(
            "the tokenizer has ids up to {}, but the model's embedding has {embedding_rows} \
             rows: the server refuses prompts with ids from {embedding_rows} on and the model \
             never writes them",
            tokenizer_ids - 1
        ));
    }
    if embedding_rows != config_vocab {
        errors.push(format!(
            "the model's config declares a vocabulary of {config_vocab}, its embedding has \
             {embedding_rows} rows"
        ));
    }
    if !errors.is_empty() {
        return Check::error(
            NAME,
            errors.join("; "),
            "use the tokenizer the model was trained with (tokenizer.json beside its weights), \
             and a config.json whose vocab_size is the embedding's row count",
        );
    }
    let padding = match embedding_rows - tokenizer_ids {
        0 => String::new(),
        n => format!(" ({n} rows past the tokenizer's ids: padding)"),
    };
    Check::ok(
        NAME,
        format!("the tokenizer's {tokenizer_ids} ids fit the embedding's {embedding_rows} rows{padding}"),
    )
}

#[cfg(test)]
mod tests {
    use super::super::report::Status;
    use super::*;

    #[test]
    fn a_tokenizer_larger_than_the_embedding_is_an_error() {
        let c = check(49153, 49152, 49152);
        assert_eq!(c.status, Status::Error);
        assert!(c.message.contains("ids up to 49152"), "{}", c.message);
        assert!(c.message.contains("49152 rows"), "{}", c.message);
    }

    #[test]
    fn padding_rows_are_fine_and_said() {
        let c = check(151665, 151936, 151936);
        assert_eq!(c.status, Status::Ok);
        assert!(c.message.contains("271 rows past"), "{}", c.message);
        assert_eq!(check(49152, 49152, 49152).status, Status::Ok);
    }

    #[test]
    fn a_config_that_disagrees_with_the_embedding_is_an_error() {
        let c = check(100, 128, 120);
        assert_eq!(c.status, Status::Error);
        assert!(
            c.message.contains("declares a vocabulary of 120"),
            "{}",
            c.message
        );
    }
}
