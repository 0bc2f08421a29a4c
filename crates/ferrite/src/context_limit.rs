//! `--max-model-len` against the model's own context limit: beyond it is refused at start, as
//! vLLM refuses it, unless `FERRITE_ALLOW_LONG_MAX_MODEL_LEN=1` (vLLM's
//! `VLLM_ALLOW_LONG_MAX_MODEL_LEN`) says to start anyway.

use ferrite_model::config::{ModelConfig, RopeScaling};

/// The variable that lets `--max-model-len` exceed the model's limit.
pub const ALLOW_LONG_ENV: &str = "FERRITE_ALLOW_LONG_MAX_MODEL_LEN";

/// The longest context the model was made for: `max_position_embeddings` (a GGUF's
/// `context_length`), or, with YaRN rope scaling, its original context times its factor when
/// that is longer (vLLM derives it so).
pub fn model_limit(config: &ModelConfig) -> usize {
    let yarn = match config.rope_scaling {
        Some(RopeScaling::Yarn(y)) if y.factor > 1.0 => {
            (y.original_max_position_embeddings as f64 * f64::from(y.factor)) as usize
        }
        _ => 0,
    };
    config.max_position_embeddings.max(yarn)
}

/// Whether the environment allows a `--max-model-len` beyond the model's limit: `1` or `true`,
/// as vLLM reads its variable.
pub fn allowed_by_env() -> bool {
    std::env::var(ALLOW_LONG_ENV)
        .is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true"))
}

/// Refuses `asked` beyond the model's limit unless `allow_long`; allowed, it is logged.
pub fn check(asked: Option<usize>, config: &ModelConfig, allow_long: bool) -> anyhow::Result<()> {
    let limit = model_limit(config);
    let Some(asked) = asked.filter(|&asked| asked > limit) else {
        return Ok(());
    };
    if allow_long {
        tracing::warn!(
            "--max-model-len {asked} is more than the model's own context limit of {limit} \
             tokens; allowed by {ALLOW_LONG_ENV}: positions past {limit} were never trained \
             and may give poor or garbled text"
        );
        return Ok(());
    }
    anyhow::bail!(
        "--max-model-len {asked} is more than the model's own context limit of {limit} tokens \
         (max_position_embeddings in config.json, context_length in a GGUF): positions past it \
         were never trained and give poor or garbled text. Give --max-model-len {limit} or \
         less, or set {ALLOW_LONG_ENV}=1 to start anyway (vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_model::config::YarnScaling;

    fn config(max_position_embeddings: usize) -> ModelConfig {
        let mut c = ferrite_model::dummy::config_for("tiny").unwrap();
        c.max_position_embeddings = max_position_embeddings;
        c.rope_scaling = None;
        c
    }

    #[test]
    fn beyond_the_limit_is_refused_naming_both_numbers_unless_allowed() {
        let c = config(8192);
        assert!(check(None, &c, false).is_ok());
        assert!(check(Some(8192), &c, false).is_ok());
        let e = check(Some(16384), &c, false).unwrap_err().to_string();
        assert!(
            e.contains("16384") && e.contains("8192") && e.contains(ALLOW_LONG_ENV),
            "{e}"
        );
        assert!(check(Some(16384), &c, true).is_ok());
    }

    #[test]
    fn yarn_extends_the_limit_to_its_original_context_times_its_factor() {
        let mut c = config(32768);
        c.rope_scaling = Some(RopeScaling::Yarn(YarnScaling {
            factor: 4.0,
            original_max_position_embeddings: 32768,
            beta_fast: 32.0,
            beta_slow: 1.0,
            truncate: true,
            attention_factor: YarnScaling::default_attention_factor(4.0),
        }));
        assert_eq!(model_limit(&c), 131072);
        assert!(check(Some(131072), &c, false).is_ok());
        assert_eq!(model_limit(&config(4096)), 4096);
    }
}
