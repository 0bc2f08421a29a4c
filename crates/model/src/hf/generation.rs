//! The sampling defaults of `generation_config.json` (its EOS ids are read with the tokenizer:
//! `tokenizer::tokenizer_from_hf_dir`).

use std::path::Path;

use serde::Deserialize;

use super::HfError;

/// What a model's authors ask generation to use when a request does not say. transformers
/// samples only with `do_sample: true`; otherwise it is greedy whatever the temperature.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct GenerationDefaults {
    #[serde(default)]
    pub do_sample: bool,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<usize>,
    pub min_p: Option<f32>,
    pub repetition_penalty: Option<f32>,
}

impl GenerationDefaults {
    /// The temperature to use when a request gives none: 0 (greedy) unless the model samples.
    pub fn default_temperature(&self) -> f32 {
        if self.do_sample {
            self.temperature.unwrap_or(1.0)
        } else {
            0.0
        }
    }
}

/// The directory's generation defaults; all unset when it has no generation_config.json.
pub fn load_generation_defaults(dir: &Path) -> Result<GenerationDefaults, HfError> {
    let path = dir.join("generation_config.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(GenerationDefaults::default())
        }
        Err(e) => return Err(HfError::io(&path, e)),
    };
    generation_defaults_from_json(&text)
}

pub fn generation_defaults_from_json(text: &str) -> Result<GenerationDefaults, HfError> {
    serde_json::from_str(text).map_err(HfError::GenerationConfig)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qwen_style_sampling_defaults_are_read() {
        let text = r#"{"bos_token_id": 151643, "do_sample": true,
            "eos_token_id": [151645, 151643], "pad_token_id": 151643,
            "repetition_penalty": 1.05, "temperature": 0.7, "top_k": 20, "top_p": 0.8,
            "transformers_version": "4.37.0"}"#;
        let d = generation_defaults_from_json(text).unwrap();
        assert!(d.do_sample);
        assert_eq!(d.default_temperature(), 0.7);
        assert_eq!(d.top_k, Some(20));
        assert_eq!(d.top_p, Some(0.8));
        assert_eq!(d.repetition_penalty, Some(1.05));
    }

    #[test]
    fn without_do_sample_the_default_is_greedy() {
        let d =
            generation_defaults_from_json(r#"{"temperature": 0.6, "eos_token_id": 2}"#).unwrap();
        assert_eq!(d.default_temperature(), 0.0);
        assert_eq!(
            generation_defaults_from_json("{}").unwrap(),
            GenerationDefaults::default()
        );
    }
}
