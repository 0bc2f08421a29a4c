//! OpenAI's `prediction` (Predicted Outputs): text the client expects the answer to mostly
//! repeat (a file being edited). ferrite drafts from it under speculative decoding
//! (`ferrite_engine::speculative::prediction`), so the answer is the one the request gets
//! without it, sooner where it matches; `usage.completion_tokens_details` counts the drafts
//! kept and rejected. Without a speculative method on the server it would change nothing, so
//! there it is a 400 naming the field.

use serde::Deserialize;

use crate::error::ApiError;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prediction {
    #[serde(rename = "type")]
    pub kind: String,
    pub content: PredictionContent,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum PredictionContent {
    Text(String),
    Parts(Vec<TextPart>),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextPart {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
}

impl Prediction {
    /// The predicted text; `speculating`: whether the server runs a speculative method.
    pub fn text(self, speculating: bool) -> Result<String, ApiError> {
        let refuse = |why: String| Err(ApiError::invalid_param("prediction", why));
        if !speculating {
            return refuse(
                "`prediction` needs speculative decoding: start the server with --speculative \
                 (ngram, suffix, draft or mtp); its predicted tokens are then the request's drafts"
                    .into(),
            );
        }
        if self.kind != "content" {
            return refuse(format!(
                "`prediction.type` must be \"content\", not {:?}",
                self.kind
            ));
        }
        match self.content {
            PredictionContent::Text(text) => Ok(text),
            PredictionContent::Parts(parts) => parts
                .into_iter()
                .map(|p| match p.kind.as_str() {
                    "text" => Ok(p.text),
                    other => refuse(format!("a prediction part must be text, not {other:?}")),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> Prediction {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn text_or_text_parts_are_the_prediction() {
        let p = parse(json!({"type": "content", "content": "fn main() {}"}));
        assert_eq!(p.text(true).unwrap(), "fn main() {}");
        let parts = json!({"type": "content", "content": [
            {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]});
        assert_eq!(parse(parts).text(true).unwrap(), "ab");
    }

    #[test]
    fn without_speculation_or_of_another_kind_it_is_a_400() {
        let p = parse(json!({"type": "content", "content": "x"}));
        let err = p.clone().text(false).unwrap_err();
        assert!(err.message.contains("--speculative"), "{}", err.message);
        let other = parse(json!({"type": "audio", "content": "x"}));
        assert_eq!(
            other.text(true).unwrap_err().param.as_deref(),
            Some("prediction")
        );
    }
}
