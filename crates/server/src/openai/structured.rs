//! The request fields that ask for structured outputs: OpenAI's `response_format`, vLLM's
//! `structured_outputs` and its older `guided_*` names. Each becomes one [`GrammarRequest`]
//! (compiled by `crate::output::structured`); asking in two ways at once is a 400.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ApiError;

/// What the output must match, before compilation.
#[derive(Debug, Clone, PartialEq)]
pub enum GrammarRequest {
    /// A JSON schema (`{"type": "object"}` for `json_object`).
    JsonSchema(Value),
    /// A regular expression (Rust `regex` syntax) the whole output matches.
    Regex(String),
    /// Exactly one of these strings.
    Choice(Vec<String>),
    /// A grammar in llguidance's Lark syntax.
    Lark(String),
}

/// A [`GrammarRequest`] and the request field it came from (named in errors).
#[derive(Debug, Clone, PartialEq)]
pub struct RequestedGrammar {
    pub grammar: GrammarRequest,
    pub param: &'static str,
}

/// The fields, `#[serde(flatten)]`ed into chat and completion requests.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct StructuredFields {
    pub response_format: Option<Value>,
    pub structured_outputs: Option<Value>,
    pub guided_json: Option<Value>,
    pub guided_regex: Option<String>,
    pub guided_choice: Option<Vec<String>>,
    pub guided_grammar: Option<String>,
    /// vLLM's per-request choice of constraint engine: ferrite has one, llguidance (vLLM's
    /// `guidance`), which `auto` picks too; naming another is a 400.
    pub guided_decoding_backend: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ResponseFormat {
    Text,
    JsonObject,
    JsonSchema { json_schema: JsonSchemaFormat },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonSchemaFormat {
    #[allow(dead_code)] // OpenAI requires it; it names the schema, nothing more.
    name: Option<String>,
    #[allow(dead_code)]
    description: Option<String>,
    schema: Option<Value>,
    /// Every answer matches the schema whether or not the client asks for strictness.
    #[allow(dead_code)]
    strict: Option<bool>,
}

/// vLLM's `structured_outputs`: exactly one of the constraint fields.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StructuredOutputs {
    json: Option<Value>,
    regex: Option<String>,
    choice: Option<Vec<String>>,
    grammar: Option<String>,
    json_object: Option<bool>,
}

impl StructuredFields {
    /// The one grammar these fields ask for, if any.
    pub fn grammar(&self) -> Result<Option<RequestedGrammar>, ApiError> {
        if let Some(backend) = &self.guided_decoding_backend {
            check_backend(backend)?;
        }
        let mut found: Vec<RequestedGrammar> = Vec::new();
        let mut push = |param, grammar| found.push(RequestedGrammar { grammar, param });
        if let Some(g) = self
            .response_format
            .as_ref()
            .map(response_format)
            .transpose()?
        {
            g.into_iter().for_each(|g| push("response_format", g));
        }
        if let Some(so) = self.structured_outputs.as_ref().filter(|v| !v.is_null()) {
            structured_outputs(so)?
                .into_iter()
                .for_each(|g| push("structured_outputs", g));
        }
        if let Some(schema) = self.guided_json.as_ref().filter(|v| !v.is_null()) {
            push(
                "guided_json",
                GrammarRequest::JsonSchema(schema_value("guided_json", schema)?),
            );
        }
        if let Some(rx) = &self.guided_regex {
            push("guided_regex", GrammarRequest::Regex(rx.clone()));
        }
        if let Some(choices) = &self.guided_choice {
            push("guided_choice", choice("guided_choice", choices)?);
        }
        if let Some(lark) = &self.guided_grammar {
            push("guided_grammar", GrammarRequest::Lark(lark.clone()));
        }
        if found.len() > 1 {
            let names: Vec<&str> = found.iter().map(|g| g.param).collect();
            return Err(ApiError::invalid_param(
                found[1].param,
                format!(
                    "ask for one output constraint, not several ({})",
                    names.join(", ")
                ),
            ));
        }
        Ok(found.pop())
    }
}

/// Backends by vLLM's names (options after a `:`, as in `guidance:disable-any-whitespace`,
/// are vLLM's tuning of that backend and not read here).
fn check_backend(backend: &str) -> Result<(), ApiError> {
    let name = backend.split(':').next().unwrap_or_default();
    if matches!(name, "auto" | "guidance" | "llguidance") {
        return Ok(());
    }
    Err(ApiError::invalid_param(
        "guided_decoding_backend",
        format!(
            "`{name}` is not available: ferrite's structured outputs run on llguidance \
             (vLLM's `guidance` backend); ask for `guidance` or `auto`"
        ),
    ))
}

fn response_format(value: &Value) -> Result<Option<GrammarRequest>, ApiError> {
    if value.is_null() {
        return Ok(None);
    }
    let format: ResponseFormat = serde_json::from_value(value.clone()).map_err(|e| {
        ApiError::invalid_param(
            "response_format",
            format!("invalid response_format ({e}); the types are text, json_object, json_schema"),
        )
    })?;
    Ok(match format {
        ResponseFormat::Text => None,
        ResponseFormat::JsonObject => Some(any_object()),
        ResponseFormat::JsonSchema { json_schema } => Some(match json_schema.schema {
            Some(schema) => GrammarRequest::JsonSchema(schema_value("response_format", &schema)?),
            None => any_object(),
        }),
    })
}

fn structured_outputs(value: &Value) -> Result<Vec<GrammarRequest>, ApiError> {
    let param = "structured_outputs";
    let so: StructuredOutputs = serde_json::from_value(value.clone())
        .map_err(|e| ApiError::invalid_param(param, format!("invalid structured_outputs: {e}")))?;
    let mut found = Vec::new();
    if let Some(schema) = so.json.as_ref().filter(|v| !v.is_null()) {
        found.push(GrammarRequest::JsonSchema(schema_value(param, schema)?));
    }
    if let Some(rx) = so.regex {
        found.push(GrammarRequest::Regex(rx));
    }
    if let Some(choices) = so.choice {
        found.push(choice(param, &choices)?);
    }
    if let Some(lark) = so.grammar {
        found.push(GrammarRequest::Lark(lark));
    }
    if so.json_object == Some(true) {
        found.push(any_object());
    }
    if found.len() > 1 {
        return Err(ApiError::invalid_param(
            param,
            "structured_outputs takes one of json, regex, choice, grammar, json_object",
        ));
    }
    Ok(found)
}

fn any_object() -> GrammarRequest {
    GrammarRequest::JsonSchema(json!({"type": "object"}))
}

/// A schema given as an object, a boolean, or (vLLM allows it) JSON text.
fn schema_value(param: &str, value: &Value) -> Result<Value, ApiError> {
    match value {
        Value::String(text) => serde_json::from_str(text).map_err(|e| {
            ApiError::invalid_param(param, format!("the JSON schema is not valid JSON: {e}"))
        }),
        Value::Object(_) | Value::Bool(_) => Ok(value.clone()),
        _ => Err(ApiError::invalid_param(
            param,
            "a JSON schema must be an object",
        )),
    }
}

fn choice(param: &str, choices: &[String]) -> Result<GrammarRequest, ApiError> {
    if choices.is_empty() {
        return Err(ApiError::invalid_param(
            param,
            "choice must list at least one string",
        ));
    }
    Ok(GrammarRequest::Choice(choices.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(v: Value) -> StructuredFields {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_backend_named_must_be_llguidance() {
        for ok in [
            "auto",
            "guidance",
            "guidance:disable-any-whitespace",
            "llguidance",
        ] {
            let f = fields(json!({"guided_regex": "a+", "guided_decoding_backend": ok}));
            assert_eq!(f.grammar().unwrap().unwrap().param, "guided_regex", "{ok}");
        }
        let f = fields(json!({"guided_regex": "a+", "guided_decoding_backend": "xgrammar"}));
        let e = f.grammar().unwrap_err();
        assert_eq!(e.param.as_deref(), Some("guided_decoding_backend"));
        assert!(
            e.message.contains("`xgrammar` is not available"),
            "{}",
            e.message
        );
    }

    #[test]
    fn every_spelling_becomes_one_grammar() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        for (body, expected) in [
            (json!({"response_format": {"type": "text"}}), None),
            (
                json!({"response_format": {"type": "json_object"}}),
                Some(any_object()),
            ),
            (
                json!({"response_format": {"type": "json_schema",
                    "json_schema": {"name": "x", "schema": schema.clone(), "strict": true}}}),
                Some(GrammarRequest::JsonSchema(schema.clone())),
            ),
            (
                json!({"structured_outputs": {"json": schema.to_string()}}),
                Some(GrammarRequest::JsonSchema(schema.clone())),
            ),
            (
                json!({"structured_outputs": {"regex": "a+"}}),
                Some(GrammarRequest::Regex("a+".into())),
            ),
            (
                json!({"guided_choice": ["yes", "no"]}),
                Some(GrammarRequest::Choice(vec!["yes".into(), "no".into()])),
            ),
        ] {
            let got = fields(body.clone()).grammar().unwrap().map(|g| g.grammar);
            assert_eq!(got, expected, "{body}");
        }
    }

    #[test]
    fn bad_or_doubled_requests_are_a_400_naming_the_field() {
        for (body, param) in [
            (
                json!({"response_format": {"type": "xml"}}),
                "response_format",
            ),
            (
                json!({"structured_outputs": {"jsn": {}}}),
                "structured_outputs",
            ),
            (
                json!({"structured_outputs": {"regex": "a", "choice": ["b"]}}),
                "structured_outputs",
            ),
            (json!({"guided_choice": []}), "guided_choice"),
            (
                json!({"response_format": {"type": "json_object"}, "guided_regex": "a"}),
                "guided_regex",
            ),
        ] {
            let e = fields(body.clone()).grammar().unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{body}");
        }
    }
}
