//! OpenAI's `verbosity` (chat completions) and `text.verbosity` (Responses): how long an
//! answer runs, for models trained with the setting. Like `reasoning_effort`, it reaches the
//! model through its chat template, as the template variable `verbosity`; a template without
//! that variable would ignore it, so there it is a 400 naming the field (the models ferrite
//! loads today have none: a server's `--chat-template`, or a request's own template, may).

use serde_json::{Map, Value};

use super::template_level::TemplateLevel;
use crate::error::ApiError;
use crate::text::chat_template::VERBOSITY_VARIABLE;

const VERBOSITY: TemplateLevel = TemplateLevel {
    variable: VERBOSITY_VARIABLE,
    lacking: "`verbosity` variable",
};

/// A verbosity a request asked for, with the field that asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestedVerbosity {
    pub level: String,
    /// `verbosity` or `text.verbosity`, for the 400.
    pub param: &'static str,
}

/// Puts the level into the template's variables; the request's field takes precedence over a
/// `verbosity` in `chat_template_kwargs`.
pub fn apply_verbosity(
    requested: Option<RequestedVerbosity>,
    template_reads_it: bool,
    kwargs: &mut Option<Map<String, Value>>,
) -> Result<(), ApiError> {
    match requested {
        Some(RequestedVerbosity { level, param }) => {
            VERBOSITY.apply(level, param, template_reads_it, kwargs)
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(level: &str) -> Option<RequestedVerbosity> {
        Some(RequestedVerbosity {
            level: level.into(),
            param: "verbosity",
        })
    }

    #[test]
    fn a_template_that_reads_it_gets_the_level_over_the_kwargs() {
        let mut kwargs = Some(Map::from_iter([("verbosity".into(), "high".into())]));
        apply_verbosity(asked("low"), true, &mut kwargs).unwrap();
        assert_eq!(kwargs.unwrap()["verbosity"], "low");
        let mut none = None;
        apply_verbosity(None, false, &mut none).unwrap();
        assert!(none.is_none());
    }

    #[test]
    fn a_template_without_it_or_an_unknown_level_is_a_400() {
        let err = apply_verbosity(asked("low"), false, &mut None).unwrap_err();
        assert_eq!(err.param.as_deref(), Some("verbosity"));
        let err = apply_verbosity(asked("loud"), true, &mut None).unwrap_err();
        assert!(err.message.contains("loud"));
    }
}
