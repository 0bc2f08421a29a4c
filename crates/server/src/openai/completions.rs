//! The `/v1/completions` request and its four prompt shapes.

use super::sampling::SamplingFields;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    pub model: Option<String>,
    pub prompt: PromptInput,
    #[serde(default)]
    pub echo: bool,
    /// Alternatives per position (0: only the chosen token's logprob).
    pub logprobs: Option<i64>,
    #[serde(flatten)]
    pub sampling: SamplingFields,
}

/// OpenAI's four prompt shapes.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum PromptInput {
    Text(String),
    Texts(Vec<String>),
    Ids(Vec<u32>),
    IdLists(Vec<Vec<u32>>),
}

/// One prompt, before tokenization.
#[derive(Debug, Clone)]
pub enum Prompt {
    Text(String),
    Ids(Vec<u32>),
}

impl PromptInput {
    pub fn into_prompts(self) -> Vec<Prompt> {
        match self {
            PromptInput::Text(t) => vec![Prompt::Text(t)],
            PromptInput::Texts(ts) => ts.into_iter().map(Prompt::Text).collect(),
            PromptInput::Ids(ids) => vec![Prompt::Ids(ids)],
            PromptInput::IdLists(lists) => lists.into_iter().map(Prompt::Ids).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_shapes_all_parse() {
        let parse = |s: &str| {
            serde_json::from_str::<CompletionRequest>(s)
                .unwrap()
                .prompt
                .into_prompts()
        };
        assert!(matches!(
            parse(r#"{"prompt": "hi"}"#)[..],
            [Prompt::Text(_)]
        ));
        assert_eq!(parse(r#"{"prompt": ["a", "b"]}"#).len(), 2);
        assert!(
            matches!(&parse(r#"{"prompt": [1, 2]}"#)[..], [Prompt::Ids(v)] if v == &vec![1, 2])
        );
        assert_eq!(parse(r#"{"prompt": [[1], [2, 3]]}"#).len(), 2);
        assert!(serde_json::from_str::<CompletionRequest>(r#"{"prompt": [-1]}"#).is_err());
        assert!(serde_json::from_str::<CompletionRequest>(r#"{"prompt": 5}"#).is_err());
    }
}
