//! A request field that reaches the model as a chat-template variable holding low, medium or
//! high: `reasoning_effort` (`generation::reasoning_effort`) and `verbosity`
//! (`generation::verbosity`). A template without the variable would ignore it, so there it is
//! a 400 naming the field.

use serde_json::{Map, Value};

use crate::error::ApiError;

/// The levels both settings take (OpenAI's; gpt-oss was trained with these efforts).
const LEVELS: [&str; 3] = ["low", "medium", "high"];

/// One such setting: its template variable and how the 400 names what the template lacks.
pub struct TemplateLevel {
    pub variable: &'static str,
    /// "reasoning effort", "`verbosity` variable".
    pub lacking: &'static str,
}

impl TemplateLevel {
    /// Puts `level` (asked for by field `param`) into the template's variables, over the same
    /// name in `chat_template_kwargs`.
    pub fn apply(
        &self,
        level: String,
        param: &str,
        template_reads_it: bool,
        kwargs: &mut Option<Map<String, Value>>,
    ) -> Result<(), ApiError> {
        if !template_reads_it {
            return Err(ApiError::invalid_param(
                param,
                format!(
                    "`{param}` is not supported by this model: its chat template has no {}",
                    self.lacking
                ),
            ));
        }
        if !LEVELS.contains(&level.as_str()) {
            return Err(ApiError::invalid_param(
                param,
                format!("`{param}` must be one of low, medium, high; got {level:?}"),
            ));
        }
        kwargs
            .get_or_insert_with(Map::new)
            .insert(self.variable.into(), Value::String(level));
        Ok(())
    }
}
