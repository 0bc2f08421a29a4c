//! The sampling and stopping fields completions and chat completions share, and the validation
//! that turns them into the engine's [`SamplingParams`].

use ferrite_engine::SamplingParams;
use serde::Deserialize;

use super::logit_fields::LogitFields;
use super::prompt_logprobs::check_prompt_logprobs;
use super::text_fields::TextOptions;
use crate::error::ApiError;

/// `n` above this is refused: every choice is a full engine request, and 16 of them already
/// fill a default batch of 64 sequences four times over with a handful of clients.
pub const MAX_N: usize = 16;
pub use super::logprobs::MAX_TOP_LOGPROBS;

/// `stop`: one string or a list of them.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum StopSpec {
    One(String),
    Many(Vec<String>),
}

impl StopSpec {
    /// Empty strings would match everywhere, so they are dropped rather than obeyed.
    pub fn into_vec(self) -> Vec<String> {
        let all = match self {
            StopSpec::One(s) => vec![s],
            StopSpec::Many(v) => v,
        };
        all.into_iter().filter(|s| !s.is_empty()).collect()
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

/// The sampling and stopping fields both endpoints accept (`#[serde(flatten)]`ed into each).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SamplingFields {
    pub max_tokens: Option<i64>,
    pub max_completion_tokens: Option<i64>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<i64>,
    pub min_p: Option<f32>,
    pub seed: Option<u64>,
    pub stop: Option<StopSpec>,
    pub stop_token_ids: Option<Vec<u32>>,
    pub n: Option<i64>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    pub repetition_penalty: Option<f32>,
    #[serde(default)]
    pub ignore_eos: bool,
    /// The logit rules' fields (`logit_fields`), read by hand so a bad value names its field.
    pub logit_bias: Option<serde_json::Value>,
    pub min_tokens: Option<serde_json::Value>,
    pub allowed_token_ids: Option<serde_json::Value>,
    pub bad_words: Option<serde_json::Value>,
    /// vLLM's: the prompt tokens' logprobs, with this many alternatives (`prompt_logprobs`).
    pub prompt_logprobs: Option<i64>,
    pub skip_special_tokens: Option<bool>,
    /// vLLM's text fields (`text_fields`).
    pub include_stop_str_in_output: Option<bool>,
    pub spaces_between_special_tokens: Option<bool>,
    pub truncate_prompt_tokens: Option<i64>,
    #[serde(default)]
    pub stream: bool,
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub return_token_ids: bool,
    /// ferrite's extension: `false` keeps this request out of speculative decoding (its
    /// output distribution is the same either way).
    pub speculative_decoding: Option<bool>,
    /// vLLM's: the request's place under `--scheduling-policy priority` (lower first).
    pub priority: Option<i32>,
}

/// What a generation request asks for once validated (before the prompt length is known).
#[derive(Debug, Clone)]
pub struct ValidatedSampling {
    /// `max_tokens` is filled in per prompt by [`ValidatedSampling::params_for_prompt`].
    pub params: SamplingParams,
    pub max_tokens: Option<usize>,
    /// The field `max_tokens` came from, for the 400 when it does not fit the context:
    /// `max_tokens`, `max_completion_tokens` or (Responses) `max_output_tokens`.
    pub max_tokens_param: &'static str,
    pub n: usize,
    pub stop: Vec<String>,
    /// vLLM's `bad_words` as sent: tokenized into `params.logit_rules` by `generation::submit`.
    pub bad_words: Vec<String>,
    /// vLLM's `prompt_logprobs`: alternatives per prompt token (not with `stream`).
    pub prompt_logprobs: Option<usize>,
    pub skip_special_tokens: bool,
    /// How the prompt is cut and the output written (vLLM's text fields).
    pub text: TextOptions,
    pub stream: bool,
    pub include_usage: bool,
    pub return_token_ids: bool,
}

/// What a request gets for the sampling fields it leaves out: OpenAI's defaults, or those of the
/// model's generation_config.json (as vLLM's default `--generation-config auto` does).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplingDefaults {
    pub temperature: f32,
    pub top_p: f32,
    /// 0 disables top-k.
    pub top_k: i64,
    pub min_p: f32,
    pub repetition_penalty: f32,
    /// The seed of requests that send none (`--seed`); `None`: an unseeded stream each.
    pub seed: Option<u64>,
}

/// OpenAI's defaults, which are the engine's (`SamplingParams::default()`).
impl Default for SamplingDefaults {
    fn default() -> Self {
        let engine = SamplingParams::default();
        Self {
            temperature: engine.temperature,
            top_p: engine.top_p,
            top_k: engine.top_k as i64,
            min_p: engine.min_p,
            repetition_penalty: engine.repetition_penalty,
            seed: None,
        }
    }
}

impl SamplingFields {
    /// Checks every field against OpenAI's ranges; `logprobs` is the number of alternatives the
    /// endpoint asked for (already validated by the caller); fields left out take `defaults`.
    pub fn validate(
        self,
        logprobs: Option<usize>,
        defaults: &SamplingDefaults,
    ) -> Result<ValidatedSampling, ApiError> {
        let max_tokens_param = if self.max_completion_tokens.is_some() {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        let max_tokens = match self.max_completion_tokens.or(self.max_tokens) {
            None => None,
            Some(m) if m < 1 => {
                return Err(ApiError::invalid_param(
                    "max_tokens",
                    format!("max_tokens must be at least 1, got {m}"),
                ))
            }
            Some(m) => Some(m as usize),
        };
        let n = match self.n.unwrap_or(1) {
            n if !(1..=MAX_N as i64).contains(&n) => {
                return Err(ApiError::invalid_param(
                    "n",
                    format!("n must be between 1 and {MAX_N}, got {n}"),
                ))
            }
            n => n as usize,
        };
        let temperature = self.temperature.unwrap_or(defaults.temperature);
        if !(0.0..=2.0).contains(&temperature) {
            return Err(ApiError::invalid_param(
                "temperature",
                format!("temperature must be in [0, 2], got {temperature}"),
            ));
        }
        let top_p = self.top_p.unwrap_or(defaults.top_p);
        if !(top_p > 0.0 && top_p <= 1.0) {
            return Err(ApiError::invalid_param(
                "top_p",
                format!("top_p must be in (0, 1], got {top_p}"),
            ));
        }
        // vLLM's convention: -1 (like 0) disables top-k.
        let top_k = match self.top_k.unwrap_or(defaults.top_k) {
            k if k < -1 => {
                return Err(ApiError::invalid_param(
                    "top_k",
                    format!("top_k must be -1 (disabled) or >= 0, got {k}"),
                ))
            }
            k => k.max(0) as usize,
        };
        let min_p = self.min_p.unwrap_or(defaults.min_p);
        if !(0.0..=1.0).contains(&min_p) {
            return Err(ApiError::invalid_param(
                "min_p",
                format!("min_p must be in [0, 1], got {min_p}"),
            ));
        }
        let presence_penalty = check_penalty("presence_penalty", self.presence_penalty)?;
        let frequency_penalty = check_penalty("frequency_penalty", self.frequency_penalty)?;
        let repetition_penalty = self
            .repetition_penalty
            .unwrap_or(defaults.repetition_penalty);
        if !(repetition_penalty > 0.0 && repetition_penalty.is_finite()) {
            return Err(ApiError::invalid_param(
                "repetition_penalty",
                format!("repetition_penalty must be > 0, got {repetition_penalty}"),
            ));
        }
        let logit = LogitFields {
            logit_bias: self.logit_bias,
            min_tokens: self.min_tokens,
            allowed_token_ids: self.allowed_token_ids,
            bad_words: self.bad_words,
        }
        .read()?;
        let params = SamplingParams {
            temperature,
            top_p,
            top_k,
            min_p,
            seed: self.seed.or(defaults.seed),
            presence_penalty,
            frequency_penalty,
            repetition_penalty,
            max_tokens: max_tokens.unwrap_or(0),
            ignore_eos: self.ignore_eos,
            stop_token_ids: self.stop_token_ids.unwrap_or_default(),
            logit_rules: logit.rules,
            logprobs,
            prompt_logprobs: None,
            allow_speculation: self.speculative_decoding.unwrap_or(true),
            priority: self.priority.unwrap_or(0),
            infill: None,
            // Set by the route from the structured-output fields.
            constraint: None,
        };
        Ok(ValidatedSampling {
            params,
            max_tokens,
            max_tokens_param,
            n,
            stop: self.stop.map(StopSpec::into_vec).unwrap_or_default(),
            bad_words: logit.bad_words,
            prompt_logprobs: check_prompt_logprobs(self.prompt_logprobs, self.stream)?,
            skip_special_tokens: self.skip_special_tokens.unwrap_or(true),
            text: TextOptions::new(
                self.include_stop_str_in_output,
                self.spaces_between_special_tokens,
                self.truncate_prompt_tokens,
            )?,
            stream: self.stream,
            include_usage: self.stream_options.is_some_and(|o| o.include_usage),
            return_token_ids: self.return_token_ids,
        })
    }
}

fn check_penalty(name: &str, value: Option<f32>) -> Result<f32, ApiError> {
    let v = value.unwrap_or(0.0);
    if !(-2.0..=2.0).contains(&v) {
        return Err(ApiError::invalid_param(
            name,
            format!("{name} must be in [-2, 2], got {v}"),
        ));
    }
    Ok(v)
}

/// `top_logprobs`/`logprobs` counts above OpenAI's limit are refused.
pub fn check_top_logprobs(param: &str, value: i64) -> Result<usize, ApiError> {
    if !(0..=MAX_TOP_LOGPROBS as i64).contains(&value) {
        return Err(ApiError::invalid_param(
            param,
            format!("{param} must be between 0 and {MAX_TOP_LOGPROBS}, got {value}"),
        ));
    }
    Ok(value as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(json: &str) -> SamplingFields {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn the_models_defaults_fill_only_what_the_request_leaves_out() {
        let model = SamplingDefaults {
            temperature: 0.6,
            top_p: 0.95,
            top_k: 20,
            min_p: 0.05,
            repetition_penalty: 1.1,
            seed: Some(3),
        };
        let p = fields("{}").validate(None, &model).unwrap().params;
        assert_eq!(p.seed, Some(3));
        let own = fields(r#"{"seed": 9}"#)
            .validate(None, &model)
            .unwrap()
            .params;
        assert_eq!(own.seed, Some(9));
        assert_eq!(
            (
                p.temperature,
                p.top_p,
                p.top_k,
                p.min_p,
                p.repetition_penalty
            ),
            (0.6, 0.95, 20, 0.05, 1.1)
        );
        let asked =
            r#"{"temperature": 0, "top_p": 0.5, "top_k": -1, "min_p": 0, "repetition_penalty": 1}"#;
        let p = fields(asked).validate(None, &model).unwrap().params;
        assert_eq!(
            (
                p.temperature,
                p.top_p,
                p.top_k,
                p.min_p,
                p.repetition_penalty
            ),
            (0.0, 0.5, 0, 0.0, 1.0)
        );
    }

    #[test]
    fn defaults_follow_openai() {
        let v = fields("{}")
            .validate(None, &SamplingDefaults::default())
            .unwrap();
        assert_eq!(v.n, 1);
        assert_eq!(v.params.temperature, 1.0);
        assert_eq!(v.params.top_p, 1.0);
        assert!(v.skip_special_tokens);
        assert!(v.max_tokens.is_none());
    }

    #[test]
    fn max_completion_tokens_wins_over_max_tokens() {
        let v = fields(r#"{"max_tokens": 5, "max_completion_tokens": 7}"#);
        assert_eq!(
            v.validate(None, &SamplingDefaults::default())
                .unwrap()
                .max_tokens,
            Some(7)
        );
    }

    #[test]
    fn out_of_range_fields_name_the_param() {
        for (json, param) in [
            (r#"{"max_tokens": 0}"#, "max_tokens"),
            (r#"{"n": 17}"#, "n"),
            (r#"{"n": 0}"#, "n"),
            (r#"{"temperature": -0.5}"#, "temperature"),
            (r#"{"temperature": 2.5}"#, "temperature"),
            (r#"{"top_p": 0}"#, "top_p"),
            (r#"{"top_p": 1.5}"#, "top_p"),
            (r#"{"min_p": 2}"#, "min_p"),
            (r#"{"presence_penalty": 3}"#, "presence_penalty"),
        ] {
            let e = fields(json)
                .validate(None, &SamplingDefaults::default())
                .unwrap_err();
            assert_eq!(e.status, 400, "{json}");
            assert_eq!(e.param.as_deref(), Some(param), "{json}");
        }
        assert_eq!(
            check_top_logprobs("top_logprobs", 21).unwrap_err().status,
            400
        );
        assert_eq!(check_top_logprobs("top_logprobs", 20).unwrap(), 20);
    }

    #[test]
    fn stop_accepts_a_string_or_a_list_and_drops_empty_ones() {
        let one = fields(r#"{"stop": "\n"}"#)
            .validate(None, &SamplingDefaults::default())
            .unwrap();
        assert_eq!(one.stop, vec!["\n".to_string()]);
        let many = fields(r#"{"stop": ["a", "", "bc"]}"#)
            .validate(None, &SamplingDefaults::default())
            .unwrap();
        assert_eq!(many.stop, vec!["a".to_string(), "bc".to_string()]);
    }
}
