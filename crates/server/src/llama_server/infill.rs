//! The `/infill` request: llama-server's fields, checked and mapped onto ferrite's sampling
//! fields. A field llama-server has and ferrite does not act on is a 400 naming it.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::error::ApiError;
use crate::openai::request_fields::unimplemented_field;
use crate::openai::sampling::{SamplingFields, StopSpec};

#[derive(Debug, Deserialize)]
pub struct InfillRequest {
    pub model: Option<String>,
    #[serde(default)]
    pub input_prefix: String,
    #[serde(default)]
    pub input_suffix: String,
    /// Other files' text, put before the FIM prompt (`text::infill_prompt`).
    #[serde(default)]
    pub input_extra: Vec<ExtraChunk>,
    /// The cursor's line so far: it follows the prefix.
    #[serde(default)]
    pub prompt: String,
    /// Tokens to generate at most; -1 (the default): up to the end of the context; 0: only
    /// read the prompt (editor plugins warm the prefix cache with it).
    pub n_predict: Option<i64>,
    pub temperature: Option<f32>,
    pub top_k: Option<i64>,
    pub top_p: Option<f32>,
    pub min_p: Option<f32>,
    /// -1: a random seed (llama-server's).
    pub seed: Option<i64>,
    #[serde(default)]
    pub stop: Vec<String>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub ignore_eos: bool,
    pub repeat_penalty: Option<f32>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    /// The samplers to apply (`samplers_in_use`).
    pub samplers: Option<Vec<String>>,
    /// Reuse the cached prefix of an earlier prompt: ferrite always does; `false` is a 400.
    pub cache_prompt: Option<bool>,
    /// Stop where a generated line is indented less than this many spaces or tabs
    /// (`early_stop`).
    pub n_indent: Option<i64>,
    /// Stop at the first new line after this many milliseconds of generation (`early_stop`).
    pub t_max_predict_ms: Option<i64>,
    /// llama-server accepts it and leaves it unimplemented ("TODO: implement" in its
    /// parameters, and editor plugins send it on every request); ferrite accepts it the same
    /// way, with no effect (docs/api.md).
    #[allow(dead_code)]
    pub t_max_prompt_ms: Option<i64>,
    /// Only these fields of the answer (`a/b` for nested ones, `result::select`).
    pub response_fields: Option<Vec<String>>,
    /// The generated token ids in `tokens`.
    #[serde(default)]
    pub return_tokens: bool,
    /// llama-server's slot; ferrite has none to pin: only -1 (any) is accepted.
    pub id_slot: Option<i64>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ExtraChunk {
    /// llama-server's default name is "tmp".
    #[serde(default = "default_filename")]
    pub filename: String,
    #[serde(default)]
    pub text: String,
}

fn default_filename() -> String {
    "tmp".into()
}

/// What the request asks for, checked.
#[derive(Debug)]
pub struct InfillPlan {
    pub sampling: SamplingFields,
    /// Tokens to generate (0: read the prompt only); `None`: up to the end of the context.
    pub n_predict: Option<usize>,
    pub n_indent: usize,
    pub t_max_predict_ms: Option<u64>,
    /// llama.cpp's `infill` sampler, last in `samplers`.
    pub infill_sampler: bool,
}

impl InfillRequest {
    pub fn plan(&self) -> Result<InfillPlan, ApiError> {
        if let Some((name, _)) = self.rest.iter().find(|(_, v)| !v.is_null()) {
            return Err(unimplemented_field(name));
        }
        if self.cache_prompt == Some(false) {
            return Err(ApiError::invalid_param(
                "cache_prompt",
                "ferrite always reuses cached prompt prefixes (the answer is the same either way)",
            ));
        }
        if matches!(self.id_slot, Some(slot) if slot != -1) {
            return Err(ApiError::invalid_param(
                "id_slot",
                "ferrite has no slots to pin a request to: leave `id_slot` out or send -1",
            ));
        }
        let n_predict = match self.n_predict {
            None => None,
            Some(n) if n < 0 => None,
            Some(n) => Some(n as usize),
        };
        let mut sampling = SamplingFields {
            // A prompt-only request still runs one step; its token is dropped (route).
            max_tokens: n_predict.map(|n| n.max(1) as i64),
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            seed: self.seed.and_then(|s| u64::try_from(s).ok()),
            stop: Some(StopSpec::Many(self.stop.clone())),
            repetition_penalty: self.repeat_penalty,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            ignore_eos: self.ignore_eos,
            stream: self.stream,
            ..SamplingFields::default()
        };
        let infill_sampler = match &self.samplers {
            Some(samplers) => samplers_in_use(samplers, &mut sampling)?,
            None => false,
        };
        Ok(InfillPlan {
            sampling,
            n_predict,
            n_indent: self.n_indent.unwrap_or(0).max(0) as usize,
            t_max_predict_ms: self
                .t_max_predict_ms
                .and_then(|t| u64::try_from(t).ok())
                .filter(|&t| t > 0),
            infill_sampler,
        })
    }
}

/// llama-server's `samplers`: the chain, in order; a sampler left out is off. ferrite's chain
/// is fixed (penalties, temperature, min-p, top-k, top-p, then llama.cpp's `infill`), so a
/// list is taken when running it in ferrite's order gives the same distribution: penalties
/// first if named, temperature before top-p and min-p unless it is 1 or they are off, min-p
/// before top-p unless one is off, `infill` last. Samplers ferrite does not have (`dry`,
/// `xtc`, `typ_p`, `top_n_sigma`, `mirostat`) are a 400. Returns whether `infill` is asked.
pub fn samplers_in_use(names: &[String], s: &mut SamplingFields) -> Result<bool, ApiError> {
    let refuse = |why: String| Err(ApiError::invalid_param("samplers", why));
    let position = |name: &str| names.iter().position(|n| n == name);
    for name in names {
        if ![
            "penalties",
            "temperature",
            "top_k",
            "top_p",
            "min_p",
            "infill",
        ]
        .contains(&name.as_str())
        {
            return refuse(format!(
                "ferrite has no `{name}` sampler; it applies penalties, temperature, min_p, \
                 top_k, top_p and infill (any of them, in that order)"
            ));
        }
    }
    if position("penalties").is_some_and(|i| i != 0) {
        return refuse("ferrite applies `penalties` before the other samplers".into());
    }
    let infill = position("infill");
    if infill.is_some_and(|i| i + 1 != names.len()) {
        return refuse("ferrite applies `infill` after the other samplers".into());
    }
    if position("penalties").is_none() {
        s.repetition_penalty = Some(1.0);
        s.presence_penalty = Some(0.0);
        s.frequency_penalty = Some(0.0);
    }
    if position("temperature").is_none() {
        s.temperature = Some(1.0);
    }
    if position("top_k").is_none() {
        s.top_k = Some(0);
    }
    if position("top_p").is_none() {
        s.top_p = Some(1.0);
    }
    if position("min_p").is_none() {
        s.min_p = Some(0.0);
    }
    // Where the list puts a cut before a rescaling or another cut that ferrite applies first,
    // the two orders agree only when one of them does nothing.
    let before =
        |a: &str, b: &str| matches!((position(a), position(b)), (Some(i), Some(j)) if i < j);
    let scales = s.temperature.is_some_and(|t| t != 1.0);
    let top_p_cuts = s.top_p.is_some_and(|p| p < 1.0);
    let min_p_cuts = s.min_p.is_some_and(|p| p > 0.0);
    if scales
        && ((before("top_p", "temperature") && top_p_cuts)
            || (before("min_p", "temperature") && min_p_cuts))
    {
        return refuse(
            "ferrite applies the temperature before top_p and min_p: list `temperature` first \
             (or send temperature 1)"
                .into(),
        );
    }
    if before("top_p", "min_p") && top_p_cuts && min_p_cuts {
        return refuse("ferrite applies min_p before top_p: list `min_p` first".into());
    }
    Ok(infill.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn samplers_left_out_are_off() {
        let mut s = SamplingFields {
            temperature: Some(0.7),
            top_p: Some(0.9),
            top_k: Some(40),
            ..Default::default()
        };
        samplers_in_use(&names(&["top_k"]), &mut s).unwrap();
        assert_eq!(s.top_k, Some(40));
        assert_eq!(s.temperature, Some(1.0));
        assert_eq!(s.top_p, Some(1.0));
        assert_eq!(s.min_p, Some(0.0));
        assert_eq!(s.repetition_penalty, Some(1.0));
        // An empty chain samples the model's own distribution.
        let mut s = SamplingFields::default();
        samplers_in_use(&[], &mut s).unwrap();
        assert_eq!((s.temperature, s.top_k), (Some(1.0), Some(0)));
    }

    #[test]
    fn an_order_ferrite_cannot_reproduce_or_an_unknown_sampler_is_refused() {
        let mut s = SamplingFields {
            temperature: Some(0.5),
            top_p: Some(0.9),
            ..Default::default()
        };
        let err = samplers_in_use(&names(&["top_p", "temperature"]), &mut s.clone()).unwrap_err();
        assert_eq!(err.param.as_deref(), Some("samplers"));
        // Temperature first is ferrite's order; top_k commutes with it.
        samplers_in_use(&names(&["top_k", "temperature", "top_p"]), &mut s).unwrap();
        // llama.vim's chain; `infill` must come last.
        assert!(samplers_in_use(&names(&["top_k", "top_p", "infill"]), &mut s).unwrap());
        let err = samplers_in_use(&names(&["infill", "top_k"]), &mut s).unwrap_err();
        assert!(err.message.contains("`infill`"), "{}", err.message);
        let err = samplers_in_use(&names(&["top_k", "dry"]), &mut s).unwrap_err();
        assert!(err.message.contains("`dry`"), "{}", err.message);
        let err = samplers_in_use(&names(&["top_k", "penalties"]), &mut s).unwrap_err();
        assert!(err.message.contains("penalties"), "{}", err.message);
        let mut cuts = SamplingFields {
            top_p: Some(0.9),
            min_p: Some(0.05),
            ..Default::default()
        };
        let err = samplers_in_use(&names(&["top_p", "min_p"]), &mut cuts.clone()).unwrap_err();
        assert!(
            err.message.contains("min_p before top_p"),
            "{}",
            err.message
        );
        assert!(!samplers_in_use(&names(&["min_p", "top_p"]), &mut cuts).unwrap());
    }

    #[test]
    fn fields_map_onto_the_sampling_fields() {
        let req: InfillRequest = serde_json::from_value(serde_json::json!({
            "input_prefix": "def f():\n", "n_predict": 0, "seed": -1, "repeat_penalty": 1.1,
            "stop": ["\n\n"], "n_indent": 4, "t_max_predict_ms": 500, "cache_prompt": true,
            "id_slot": -1, "t_max_prompt_ms": 500
        }))
        .unwrap();
        let plan = req.plan().unwrap();
        assert_eq!(plan.n_predict, Some(0));
        assert_eq!(plan.sampling.max_tokens, Some(1));
        assert_eq!(plan.sampling.seed, None);
        assert_eq!(plan.sampling.repetition_penalty, Some(1.1));
        assert_eq!((plan.n_indent, plan.t_max_predict_ms), (4, Some(500)));
        for (field, value) in [
            ("cache_prompt", serde_json::json!(false)),
            ("id_slot", serde_json::json!(2)),
            ("n_probs", serde_json::json!(3)),
        ] {
            let mut body = serde_json::json!({"input_prefix": "x"});
            body[field] = value;
            let req: InfillRequest = serde_json::from_value(body).unwrap();
            assert_eq!(req.plan().unwrap_err().param.as_deref(), Some(field));
        }
    }
}
