//! llama-server's answer to `/completion` and `/infill` (its own format, not OpenAI's): the
//! whole result, or in a stream one partial per piece of text and the whole result last
//! (with empty `content`); `response_fields` keeps only the fields a client names.

use serde::Serialize;
use serde_json::{Map, Value};

/// The whole result.
#[derive(Debug, Serialize)]
pub struct InfillResult {
    pub index: usize,
    pub content: String,
    /// The generated token ids, with `return_tokens` (else empty, as llama-server sends).
    pub tokens: Vec<u32>,
    pub stop: bool,
    pub model: String,
    pub tokens_predicted: usize,
    /// Prompt tokens.
    pub tokens_evaluated: usize,
    /// Prompt tokens read from the prefix cache.
    pub tokens_cached: usize,
    pub has_new_line: bool,
    /// Whether the context filled up (ferrite never shifts the context: false).
    pub truncated: bool,
    /// `eos`, `word` (a stop string), `limit` (n_predict, n_indent, t_max_predict_ms).
    pub stop_type: &'static str,
    pub stopping_word: String,
    pub timings: Timings,
}

#[derive(Debug, Clone, Serialize)]
pub struct Timings {
    /// Prompt tokens computed (not from the cache), and the time until the first token.
    pub prompt_n: usize,
    pub prompt_ms: f64,
    pub prompt_per_token_ms: f64,
    pub prompt_per_second: f64,
    /// Generated tokens, and the time from the first to the last.
    pub predicted_n: usize,
    pub predicted_ms: f64,
    pub predicted_per_token_ms: f64,
    pub predicted_per_second: f64,
    pub cache_n: usize,
}

impl Timings {
    pub fn new(prompt_n: usize, prompt_ms: f64, predicted_n: usize, predicted_ms: f64) -> Self {
        let per = |ms: f64, n: usize| if n == 0 { 0.0 } else { ms / n as f64 };
        let rate = |ms: f64, n: usize| if ms <= 0.0 { 0.0 } else { 1e3 * n as f64 / ms };
        Self {
            prompt_n,
            prompt_ms,
            prompt_per_token_ms: per(prompt_ms, prompt_n),
            prompt_per_second: rate(prompt_ms, prompt_n),
            predicted_n,
            predicted_ms,
            predicted_per_token_ms: per(predicted_ms, predicted_n),
            predicted_per_second: rate(predicted_ms, predicted_n),
            cache_n: 0,
        }
    }
}

/// One piece of a stream.
#[derive(Debug, Serialize)]
pub struct InfillPartial {
    pub index: usize,
    pub content: String,
    pub tokens: Vec<u32>,
    pub stop: bool,
    pub tokens_predicted: usize,
    pub tokens_evaluated: usize,
}

/// `value`'s fields named in `fields` (llama-server's `response_fields`): each as a key of
/// its own, `a/b` naming field `b` of object `a`; names that lead nowhere are left out.
pub fn select(value: &Value, fields: &[String]) -> Value {
    let mut out = Map::new();
    for path in fields {
        let found = path
            .split('/')
            .try_fold(value, |v, key| v.as_object()?.get(key));
        if let Some(found) = found {
            out.insert(path.clone(), found.clone());
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selected_fields_keep_their_paths_as_keys() {
        let v = json!({"content": "x", "timings": {"prompt_n": 3}, "stop": true});
        let fields: Vec<String> = ["content", "timings/prompt_n", "timings/nope", ""]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            select(&v, &fields),
            json!({"content": "x", "timings/prompt_n": 3})
        );
    }

    #[test]
    fn rates_of_nothing_are_zero() {
        let t = Timings::new(0, 0.0, 4, 20.0);
        assert_eq!(t.prompt_per_second, 0.0);
        assert_eq!(t.predicted_per_token_ms, 5.0);
        assert_eq!(t.predicted_per_second, 200.0);
    }
}
