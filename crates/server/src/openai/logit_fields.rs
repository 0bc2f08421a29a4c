//! The fields that become the engine's logit rules: OpenAI's `logit_bias` and vLLM's
//! `min_tokens`, `allowed_token_ids` and `bad_words`. They arrive as JSON values and are read
//! here, so that every bad value is a 400 naming its field (serde's message would name none).
//! What needs the model (token ids against its vocabulary, `bad_words` tokenized, `min_tokens`
//! against the final `max_tokens`) is checked once the prompt is known, in
//! `generation/logit_rules.rs`.

use std::collections::BTreeMap;

use ferrite_engine::LogitRules;
use serde_json::Value;

use crate::error::ApiError;

/// OpenAI's range for a `logit_bias` value.
pub const MAX_BIAS: f64 = 100.0;

/// The logit fields as sent (each `None` when absent or `null`).
#[derive(Debug, Clone, Default)]
pub struct LogitFields {
    pub logit_bias: Option<Value>,
    pub min_tokens: Option<Value>,
    pub allowed_token_ids: Option<Value>,
    pub bad_words: Option<Value>,
}

/// The logit fields once read: the rules, with `bad_words` still text (the engine's rules
/// take token sequences, which the tokenizer makes: `generation::logit_rules`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestedRules {
    pub rules: LogitRules,
    pub bad_words: Vec<String>,
}

impl LogitFields {
    pub fn read(self) -> Result<RequestedRules, ApiError> {
        let logit_bias = self.logit_bias.map(read_bias).transpose()?;
        let min_tokens = match self.min_tokens {
            None => 0,
            Some(v) => v.as_u64().ok_or_else(|| {
                ApiError::invalid_param(
                    "min_tokens",
                    format!("min_tokens must be an integer >= 0, got {v}"),
                )
            })? as usize,
        };
        let allowed_token_ids = self.allowed_token_ids.map(read_allowed).transpose()?;
        let bad_words = self.bad_words.map(read_bad_words).transpose()?;
        Ok(RequestedRules {
            rules: LogitRules {
                logit_bias: logit_bias.unwrap_or_default(),
                min_tokens,
                allowed_token_ids,
                bad_words: Vec::new(),
                thinking_budget: None,
            },
            bad_words: bad_words.unwrap_or_default(),
        })
    }
}

/// `{"token id": bias}`: keys are token ids written as strings (OpenAI's), values in
/// [-100, 100]. A key given twice (`"7"` and `"07"`) keeps the last value, as a dict would.
fn read_bias(value: Value) -> Result<Vec<(u32, f32)>, ApiError> {
    let bad = |message: String| ApiError::invalid_param("logit_bias", message);
    let Value::Object(map) = value else {
        return Err(bad(format!(
            "logit_bias must be an object mapping token ids to biases, got {value}"
        )));
    };
    let mut bias = BTreeMap::new();
    for (key, v) in map {
        let token: u32 = key.trim().parse().map_err(|_| {
            bad(format!(
                "logit_bias keys must be token ids (integers >= 0), got `{key}`"
            ))
        })?;
        let b = v
            .as_f64()
            .filter(|b| (-MAX_BIAS..=MAX_BIAS).contains(b))
            .ok_or_else(|| {
                bad(format!(
                    "logit_bias values must be numbers in [-100, 100], got {v} for token {token}"
                ))
            })?;
        bias.insert(token, b as f32);
    }
    Ok(bias.into_iter().collect())
}

/// A non-empty list of token ids (vLLM refuses an empty one).
fn read_allowed(value: Value) -> Result<Vec<u32>, ApiError> {
    let bad = |message: String| ApiError::invalid_param("allowed_token_ids", message);
    let Value::Array(items) = value else {
        return Err(bad(format!(
            "allowed_token_ids must be a list of token ids, got {value}"
        )));
    };
    if items.is_empty() {
        return Err(bad("allowed_token_ids must not be empty".into()));
    }
    items
        .iter()
        .map(|v| {
            v.as_u64()
                .and_then(|t| u32::try_from(t).ok())
                .ok_or_else(|| {
                    bad(format!(
                        "allowed_token_ids must hold token ids (integers >= 0), got {v}"
                    ))
                })
        })
        .collect()
}

/// A list of words; an empty (or blank) one would ban nothing sensible, so it is refused.
fn read_bad_words(value: Value) -> Result<Vec<String>, ApiError> {
    let bad = |message: String| ApiError::invalid_param("bad_words", message);
    let Value::Array(items) = value else {
        return Err(bad(format!(
            "bad_words must be a list of strings, got {value}"
        )));
    };
    items
        .into_iter()
        .map(|v| match v {
            Value::String(s) if !s.trim().is_empty() => Ok(s),
            Value::String(_) => Err(bad("bad_words entries must not be empty".into())),
            other => Err(bad(format!(
                "bad_words must be a list of strings, got {other}"
            ))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(v: Value) -> Result<RequestedRules, ApiError> {
        let fields = LogitFields {
            logit_bias: v.get("logit_bias").cloned(),
            min_tokens: v.get("min_tokens").cloned(),
            allowed_token_ids: v.get("allowed_token_ids").cloned(),
            bad_words: v.get("bad_words").cloned(),
        };
        fields.read()
    }

    #[test]
    fn good_fields_become_rules() {
        let got = read(json!({
            "logit_bias": {"50": -100, "7": 2.5, "007": 1},
            "min_tokens": 3,
            "allowed_token_ids": [1, 2, 3],
            "bad_words": ["foo bar", " baz"],
        }))
        .unwrap();
        assert_eq!(got.rules.logit_bias, vec![(7, 1.0), (50, -100.0)]);
        assert_eq!(got.rules.min_tokens, 3);
        assert_eq!(got.rules.allowed_token_ids, Some(vec![1, 2, 3]));
        assert!(got.rules.bad_words.is_empty());
        assert_eq!(got.bad_words, vec!["foo bar", " baz"]);
        assert_eq!(read(json!({})).unwrap(), RequestedRules::default());
    }

    #[test]
    fn bad_values_are_a_400_naming_the_field() {
        for (body, param) in [
            (json!({"logit_bias": {"abc": 1}}), "logit_bias"),
            (json!({"logit_bias": {"-1": 1}}), "logit_bias"),
            (json!({"logit_bias": {"5": 101}}), "logit_bias"),
            (json!({"logit_bias": {"5": -100.5}}), "logit_bias"),
            (json!({"logit_bias": {"5": "1"}}), "logit_bias"),
            (json!({"logit_bias": [1, 2]}), "logit_bias"),
            (json!({"min_tokens": -1}), "min_tokens"),
            (json!({"min_tokens": 1.5}), "min_tokens"),
            (json!({"allowed_token_ids": []}), "allowed_token_ids"),
            (json!({"allowed_token_ids": [1, -2]}), "allowed_token_ids"),
            (json!({"allowed_token_ids": 4}), "allowed_token_ids"),
            (json!({"bad_words": "word"}), "bad_words"),
            (json!({"bad_words": ["ok", ""]}), "bad_words"),
            (json!({"bad_words": [" "]}), "bad_words"),
            (json!({"bad_words": [3]}), "bad_words"),
        ] {
            let e = read(body.clone()).unwrap_err();
            assert_eq!(e.status, 400, "{body}");
            assert_eq!(e.param.as_deref(), Some(param), "{body}");
        }
    }
}
