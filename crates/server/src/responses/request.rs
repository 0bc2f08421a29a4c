//! The `POST /v1/responses` body. `store` (default true) keeps the response
//! (`responses::store`), `previous_response_id` continues a stored one (the route looks its
//! conversation up and hands it to [`ResponsesRequest::read`]), `background` runs it to be
//! polled. `truncation` takes `disabled` (what ferrite does) and `include` no value yet. Any
//! other field not below is a 400 naming it, as on the chat route.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Value};

use super::input::{chat_messages, Input};
use super::object::ResponseSettings;
use super::tools::{FunctionTool, ResponsesToolChoice, TextConfig};
use crate::error::ApiError;
use crate::generation::chat_turn::ChatTurn;
use crate::generation::reasoning_effort::RequestedEffort;
use crate::generation::verbosity::RequestedVerbosity;
use crate::openai::request_fields::refuse_unimplemented;
use crate::openai::sampling::{SamplingDefaults, SamplingFields, ValidatedSampling};

#[derive(Debug, Deserialize)]
pub struct ResponsesRequest {
    pub model: Option<String>,
    pub input: Option<Input>,
    /// A system message ahead of `input`.
    pub instructions: Option<String>,
    #[serde(default)]
    pub tools: Vec<FunctionTool>,
    pub tool_choice: Option<ResponsesToolChoice>,
    pub parallel_tool_calls: Option<bool>,
    pub max_output_tokens: Option<i64>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub text: TextConfig,
    /// `effort` goes to the chat template (models that take it); summaries are refused.
    pub reasoning: Option<Value>,
    pub previous_response_id: Option<String>,
    pub background: Option<bool>,
    /// Keep the response (default true, as OpenAI's).
    pub store: Option<bool>,
    /// Extra output to include: none of OpenAI's values can be honoured yet (each a 400).
    pub include: Option<Vec<String>>,
    /// `disabled` (OpenAI's default, what ferrite does); `auto` is a 400.
    pub truncation: Option<String>,
    /// Whatever no field above took: refused unless ignored on purpose (`store`, `metadata`,
    /// `user`, ...). Sorted, so the field refused first does not depend on map order.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// What the route needs once the request is read.
pub struct ReadRequest {
    pub turn: ChatTurn,
    pub sampling: ValidatedSampling,
    pub settings: ResponseSettings,
    /// The conversation as input items: the stored one continued, then this input.
    pub items: Vec<Value>,
    pub background: bool,
}

impl ResponsesRequest {
    /// Checks every field and translates the request to the chat path's terms; `prior` is
    /// the conversation `previous_response_id` continues (as input items).
    pub fn read(
        self,
        defaults: &SamplingDefaults,
        prior: Vec<Value>,
    ) -> Result<ReadRequest, ApiError> {
        self.refuse_unsupported()?;
        let max_output_tokens = match self.max_output_tokens {
            Some(m) if m < 1 => {
                return Err(ApiError::invalid_param(
                    "max_output_tokens",
                    format!("max_output_tokens must be at least 1, got {m}"),
                ))
            }
            m => m.map(|m| m as usize),
        };
        let mut sampling = SamplingFields {
            max_tokens: max_output_tokens.map(|m| m as i64),
            temperature: self.temperature,
            top_p: self.top_p,
            stream: self.stream,
            ..SamplingFields::default()
        }
        .validate(None, defaults)?;
        sampling.max_tokens_param = "max_output_tokens";
        let input = self
            .input
            .ok_or_else(|| ApiError::invalid_param("input", "`input` is required"))?;
        let mut items = prior;
        match input {
            Input::Text(text) => items.push(json!({"role": "user", "content": text})),
            Input::Items(more) => items.extend(more),
        }
        let messages = chat_messages(self.instructions.clone(), Input::Items(items.clone()))?;
        if messages.is_empty() {
            return Err(ApiError::invalid_param(
                "input",
                "`input` must not be empty",
            ));
        }
        let tools = self
            .tools
            .iter()
            .map(FunctionTool::to_spec)
            .collect::<Result<Vec<_>, _>>()?;
        let tool_choice = self.tool_choice.unwrap_or_default();
        let turn = ChatTurn {
            messages,
            tools: (!tools.is_empty()).then_some(tools),
            tool_choice: Some(tool_choice.to_chat()?),
            parallel_tool_calls: self.parallel_tool_calls,
            chat_template_kwargs: None,
            add_generation_prompt: true,
            continue_final_message: false,
            add_special_tokens: false,
            grammar: self.text.grammar()?,
            reasoning_effort: requested_effort(self.reasoning.as_ref())?,
            verbosity: self.text.verbosity.clone().map(|level| RequestedVerbosity {
                level,
                param: "text.verbosity",
            }),
            ..ChatTurn::default()
        };
        let settings = ResponseSettings {
            instructions: self.instructions,
            max_output_tokens,
            parallel_tool_calls: self.parallel_tool_calls.unwrap_or(true),
            temperature: sampling.params.temperature,
            top_p: sampling.params.top_p,
            text: self.text,
            tool_choice,
            tools: self.tools,
        };
        Ok(ReadRequest {
            turn,
            sampling,
            settings,
            items,
            background: self.background == Some(true),
        })
    }

    fn refuse_unsupported(&self) -> Result<(), ApiError> {
        if self.background == Some(true) {
            if self.store == Some(false) {
                return Err(ApiError::invalid_param(
                    "background",
                    "`background` needs `store`: a background response is polled from the store",
                ));
            }
            if self.stream {
                return Err(ApiError::invalid_param(
                    "background",
                    "`background` with `stream` is not supported: poll GET /v1/responses/{id}",
                ));
            }
        }
        if let Some(value) = self.include.iter().flatten().next() {
            return Err(ApiError::invalid_param(
                "include",
                format!(
                    "`include` value `{value}` is not supported: {}",
                    why_not(value)
                ),
            ));
        }
        match self.truncation.as_deref() {
            None | Some("disabled") => {}
            Some("auto") => {
                return Err(ApiError::invalid_param(
                    "truncation",
                    "`truncation: \"auto\"` is not supported: an input over the context is a \
                     400 (`disabled`); send a shorter conversation",
                ))
            }
            Some(other) => {
                return Err(ApiError::invalid_param(
                    "truncation",
                    format!(
                        "Invalid value: '{other}'. Supported values are: 'auto' and 'disabled'."
                    ),
                ))
            }
        }
        refuse_unimplemented(&self.rest)
    }
}

/// Why an `include` value cannot be honoured.
fn why_not(value: &str) -> &'static str {
    match value {
        "message.output_text.logprobs" => "logprobs are not offered on /v1/responses yet",
        "reasoning.encrypted_content" => {
            "reasoning items carry their text in `content` instead; send them back as they came"
        }
        "message.input_image.image_url" | "computer_call_output.output.image_url" => {
            "this server takes no images"
        }
        v if v.starts_with("file_search_call")
            || v.starts_with("web_search_call")
            || v.starts_with("code_interpreter_call") =>
        {
            "this server runs no built-in tools"
        }
        _ => "not a value OpenAI defines",
    }
}

/// `reasoning.effort`; any other setting in `reasoning` (summaries) is a 400 naming it.
fn requested_effort(reasoning: Option<&Value>) -> Result<Option<RequestedEffort>, ApiError> {
    let Some(reasoning) = reasoning.filter(|r| asks_for_something(r)) else {
        return Ok(None);
    };
    let Value::Object(fields) = reasoning else {
        return Err(ApiError::invalid_param(
            "reasoning",
            "`reasoning` must be an object",
        ));
    };
    let mut effort = None;
    for (name, value) in fields {
        match (name.as_str(), value) {
            (_, Value::Null) => {}
            ("effort", Value::String(e)) => effort = Some(e.clone()),
            ("effort", _) => {
                return Err(ApiError::invalid_param(
                    "reasoning.effort",
                    "`reasoning.effort` must be a string",
                ))
            }
            (other, _) => {
                let param = format!("reasoning.{other}");
                return Err(ApiError::invalid_param(
                    &param,
                    format!("`{param}` is not supported"),
                ));
            }
        }
    }
    Ok(effort.map(|effort| RequestedEffort {
        effort,
        param: "reasoning.effort",
    }))
}

/// A setting that asks for nothing: `null`, or an object of `null`s (`{"effort": null}`).
fn asks_for_something(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Object(fields) => fields.values().any(|v| !v.is_null()),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(body: Value) -> Result<ReadRequest, ApiError> {
        let req: ResponsesRequest = serde_json::from_value(body).unwrap();
        req.read(&SamplingDefaults::default(), Vec::new())
    }

    #[test]
    fn include_and_truncation_take_what_ferrite_does_and_name_the_rest() {
        let base = json!({"model": "m", "input": "hi"});
        let with = |extra: Value| {
            let mut body = base.clone();
            body.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            read(body)
        };
        for ok in [
            json!({"include": []}),
            json!({"include": null}),
            json!({"truncation": "disabled"}),
        ] {
            assert!(with(ok.clone()).is_ok(), "{ok}");
        }
        for (bad, param, says) in [
            (
                json!({"include": ["reasoning.encrypted_content"]}),
                "include",
                "content",
            ),
            (
                json!({"include": ["message.output_text.logprobs"]}),
                "include",
                "logprobs",
            ),
            (
                json!({"include": ["web_search_call.results"]}),
                "include",
                "built-in",
            ),
            (json!({"truncation": "auto"}), "truncation", "auto"),
            (
                json!({"truncation": "sometimes"}),
                "truncation",
                "sometimes",
            ),
        ] {
            let e = with(bad.clone()).err().unwrap();
            assert_eq!(e.param.as_deref(), Some(param), "{bad}");
            assert!(e.message.contains(says), "{}", e.message);
        }
    }

    #[test]
    fn a_continuation_renders_the_stored_items_before_the_new_input() {
        let req: ResponsesRequest =
            serde_json::from_value(json!({"input": "and then?", "instructions": "Be brief."}))
                .unwrap();
        let prior = vec![
            json!({"role": "user", "content": "once"}),
            json!({"type": "message", "role": "assistant",
                   "content": [{"type": "output_text", "text": "upon", "annotations": []}]}),
        ];
        let r = req.read(&SamplingDefaults::default(), prior).unwrap();
        let roles: Vec<&str> = r.turn.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        // The instructions are this request's, not part of the kept conversation.
        assert_eq!(r.items.len(), 3);
        assert_eq!(r.items[2], json!({"role": "user", "content": "and then?"}));
    }

    #[test]
    fn a_full_request_becomes_a_chat_turn() {
        let r = read(
            json!({"model": "m", "input": "hi", "instructions": "Be brief.",
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
            "tool_choice": {"type": "function", "name": "f"}, "parallel_tool_calls": false,
            "max_output_tokens": 5, "temperature": 0, "top_p": 0.5, "stream": true,
            "store": false, "metadata": {"k": "v"}, "user": "u", "reasoning": null}),
        )
        .unwrap();
        assert_eq!(r.turn.messages.len(), 2);
        assert_eq!(r.turn.tools.as_ref().map(Vec::len), Some(1));
        assert!(r.turn.grammar.is_none());
        assert_eq!(r.turn.parallel_tool_calls, Some(false));
        assert_eq!(r.sampling.max_tokens, Some(5));
        assert_eq!(
            (r.sampling.params.temperature, r.sampling.params.top_p),
            (0.0, 0.5)
        );
        assert!(r.sampling.stream);
        assert_eq!(r.settings.max_output_tokens, Some(5));
        assert!(!r.settings.parallel_tool_calls);
    }

    #[test]
    fn unknown_fields_and_background_without_store_are_a_400_naming_them() {
        for (extra, param) in [
            (json!({"background": true, "store": false}), "background"),
            (json!({"background": true, "stream": true}), "background"),
            (
                json!({"reasoning": {"summary": "auto"}}),
                "reasoning.summary",
            ),
            (
                json!({"include": ["reasoning.encrypted_content"]}),
                "include",
            ),
            (json!({"temprature": 1}), "temprature"),
            (json!({"max_output_tokens": 0}), "max_output_tokens"),
            (json!({"tools": [{"type": "file_search"}]}), "tools"),
            (json!({"tool_choice": {"type": "mcp"}}), "tool_choice"),
        ] {
            let mut body = json!({"input": "hi"});
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            let e = read(body).err().expect("refused");
            assert_eq!(e.status, 400, "{extra}");
            assert_eq!(e.param.as_deref(), Some(param), "{extra}");
        }
        assert_eq!(
            read(json!({})).err().unwrap().param.as_deref(),
            Some("input")
        );
        assert_eq!(
            read(json!({"input": []})).err().unwrap().param.as_deref(),
            Some("input")
        );
        assert!(
            read(json!({"input": "hi", "background": false, "reasoning": {"effort": null}}))
                .is_ok()
        );
    }

    #[test]
    fn the_reasoning_effort_is_asked_for_the_template() {
        let r = read(json!({"input": "hi", "reasoning": {"effort": "low", "summary": null}}));
        let asked = r.unwrap().turn.reasoning_effort.unwrap();
        assert_eq!(
            (asked.effort.as_str(), asked.param),
            ("low", "reasoning.effort")
        );
    }
}
