//! `reasoning_effort` (chat completions) and `reasoning.effort` (Responses): how long a model
//! that has the setting reasons. It reaches the model through its chat template's
//! `reasoning_effort` variable, as transformers and vLLM pass it (gpt-oss's template writes
//! `Reasoning: low|medium|high` into its system message); a model whose template has no such
//! variable would ignore it, so there it is a 400 naming the field.

use serde_json::{Map, Value};

use super::template_level::TemplateLevel;
use crate::error::ApiError;
use crate::text::chat_template::EFFORT_VARIABLE;

const EFFORT: TemplateLevel = TemplateLevel {
    variable: EFFORT_VARIABLE,
    lacking: "reasoning effort",
};

/// An effort a request asked for, with the field that asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestedEffort {
    pub effort: String,
    /// `reasoning_effort` or `reasoning.effort`, for the 400.
    pub param: &'static str,
}

/// Puts the effort into the template's variables; the request's field takes precedence over a
/// `reasoning_effort` in `chat_template_kwargs`.
pub fn apply_effort(
    requested: Option<RequestedEffort>,
    template_reads_it: bool,
    kwargs: &mut Option<Map<String, Value>>,
) -> Result<(), ApiError> {
    match requested {
        Some(RequestedEffort { effort, param }) => {
            EFFORT.apply(effort, param, template_reads_it, kwargs)
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(effort: &str) -> Option<RequestedEffort> {
        Some(RequestedEffort {
            effort: effort.into(),
            param: "reasoning_effort",
        })
    }

    #[test]
    fn the_effort_becomes_the_template_variable() {
        let mut kwargs = None;
        apply_effort(asked("high"), true, &mut kwargs).unwrap();
        assert_eq!(kwargs.unwrap()["reasoning_effort"], "high");
        let mut none = None;
        apply_effort(None, false, &mut none).unwrap();
        assert_eq!(none, None);
    }

    #[test]
    fn an_effort_the_model_cannot_take_is_a_400_naming_the_field() {
        let err = apply_effort(asked("high"), false, &mut None).unwrap_err();
        assert_eq!(err.param.as_deref(), Some("reasoning_effort"));
        let err = apply_effort(asked("extreme"), true, &mut None).unwrap_err();
        assert_eq!(err.param.as_deref(), Some("reasoning_effort"));
    }
}
