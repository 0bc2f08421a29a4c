//! Fields a request may carry that ferrite does not implement. A field the server does not act
//! on is a 400 naming it, never silently ignored (a client asking for JSON output must not get
//! free text with HTTP 200); only the few fields below that change nothing about the answer are
//! accepted and ignored on purpose. docs/api.md lists both.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::ApiError;

/// Accepted and ignored on purpose: bookkeeping for OpenAI's platform that has no effect on
/// what a self-hosted server generates. Clients (LangChain, agent frameworks) send these
/// routinely, so refusing them would break them for nothing.
pub const IGNORED_ON_PURPOSE: &[&str] = &[
    // An end-user id for OpenAI's abuse monitoring (and its successor).
    "user",
    "safety_identifier",
    // Stored completions and their tags: nothing is stored here.
    "store",
    "metadata",
    // OpenAI's latency tier: one tier here.
    "service_tier",
    // A routing hint for OpenAI's prompt cache: ferrite's prefix cache needs none.
    "prompt_cache_key",
];

/// OpenAI and vLLM fields that ferrite knows but does not implement yet: refused with "not
/// supported yet" rather than "unknown field", so the client knows it is not a typo.
const NOT_YET: &[&str] = &[
    "audio",
    "modalities",
    "web_search_options",
    "mm_processor_kwargs",
];

/// Fields ferrite refuses by design, each with why and what to use instead.
const REFUSED: &[(&str, &str)] = &[(
    "logits_processors",
    "per-request logits processors are Python callables named by qualified name, which ferrite \
     (a Rust server) cannot run; vLLM V1 refuses them too. `logit_bias`, `allowed_token_ids`, \
     `bad_words`, `min_tokens` and structured outputs shape the distribution instead",
)];

/// Refuses the first field of `rest` (the fields no typed field took) that is neither ignored on
/// purpose nor `null` (a client that sends `"prediction": null` asks for nothing).
pub fn refuse_unimplemented(rest: &BTreeMap<String, Value>) -> Result<(), ApiError> {
    for (name, value) in rest {
        if value.is_null() || IGNORED_ON_PURPOSE.contains(&name.as_str()) {
            continue;
        }
        return Err(unimplemented_field(name));
    }
    Ok(())
}

/// The 400 for a field ferrite does not act on.
pub fn unimplemented_field(name: &str) -> ApiError {
    let refused = REFUSED.iter().find(|(field, _)| *field == name);
    let message = match refused {
        Some((_, why)) => format!("`{name}` is not supported: {why}"),
        None if NOT_YET.contains(&name) => format!("`{name}` is not supported yet"),
        None => format!("unknown field `{name}`"),
    };
    ApiError {
        code: Some("unsupported_parameter"),
        ..ApiError::invalid_param(name, message)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rest(v: Value) -> BTreeMap<String, Value> {
        serde_json::from_value(v).unwrap_or_default()
    }

    #[test]
    fn ignored_fields_and_nulls_pass_others_name_the_field() {
        assert!(refuse_unimplemented(&rest(json!({"user": "u", "metadata": {"a": "b"}}))).is_ok());
        assert!(refuse_unimplemented(&rest(json!({"logits_processors": null}))).is_ok());
        let e = refuse_unimplemented(&rest(json!({"logits_processors": ["a.B"]}))).unwrap_err();
        assert_eq!(e.status, 400);
        assert_eq!(e.param.as_deref(), Some("logits_processors"));
        assert!(e
            .message
            .starts_with("`logits_processors` is not supported: per-request logits processors"));
        let later = refuse_unimplemented(&rest(json!({"audio": {"voice": "x"}}))).unwrap_err();
        assert_eq!(later.message, "`audio` is not supported yet");
        let typo = refuse_unimplemented(&rest(json!({"temprature": 0}))).unwrap_err();
        assert_eq!(typo.message, "unknown field `temprature`");
    }
}
