//! A Hugging Face model directory's tokenizer: `tokenizer.json`, `tokenizer_config.json`
//! (special tokens, `chat_template`), `chat_template.jinja` and `generation_config.json`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{stop_ids, LoadedTokenizer};

#[derive(Debug, thiserror::Error)]
pub enum HfTokenizerError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not valid JSON: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("cannot load {path}: {message}")]
    Tokenizer { path: PathBuf, message: String },
    #[error("{path}: `{key}` should be {expected}")]
    Field {
        path: PathBuf,
        key: &'static str,
        expected: &'static str,
    },
}

fn read_json(path: &Path) -> Result<Option<Value>, HfTokenizerError> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            serde_json::from_str(&text)
                .map(Some)
                .map_err(|source| HfTokenizerError::Json {
                    path: path.to_owned(),
                    source,
                })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(HfTokenizerError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

/// A special token as tokenizer_config.json writes it: `"<s>"` or `{"content": "<s>", ...}`.
fn token_text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
}

/// `chat_template` is a string, or a list of `{"name", "template"}` of which "default" is the
/// one used for plain chat.
fn chat_template_field(config: &Value, path: &Path) -> Result<Option<String>, HfTokenizerError> {
    let bad = || HfTokenizerError::Field {
        path: path.to_owned(),
        key: "chat_template",
        expected: "a string or a list of {name, template}",
    };
    match config.get("chat_template") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Array(items)) => {
            let named = |want: &str| {
                items
                    .iter()
                    .find(|i| i.get("name").and_then(Value::as_str) == Some(want))
            };
            let chosen = named("default").or(items.first()).ok_or_else(bad)?;
            chosen
                .get("template")
                .and_then(Value::as_str)
                .map(|s| Some(s.to_owned()))
                .ok_or_else(bad)
        }
        Some(_) => Err(bad()),
    }
}

/// `eos_token_id` of generation_config.json: one id or a list.
fn generation_eos_ids(dir: &Path) -> Result<Vec<u32>, HfTokenizerError> {
    let path = dir.join("generation_config.json");
    let ids = match read_json(&path)?
        .as_ref()
        .and_then(|c| c.get("eos_token_id").cloned())
    {
        None | Some(Value::Null) => vec![],
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_u64).collect(),
        Some(v) => v.as_u64().into_iter().collect(),
    };
    Ok(ids
        .into_iter()
        .filter_map(|id| u32::try_from(id).ok())
        .collect())
}

pub fn tokenizer_from_hf_dir(dir: &Path) -> Result<LoadedTokenizer, HfTokenizerError> {
    let tokenizer_path = dir.join("tokenizer.json");
    let tokenizer = tokenizers::Tokenizer::from_file(&tokenizer_path).map_err(|e| {
        HfTokenizerError::Tokenizer {
            path: tokenizer_path.clone(),
            message: e.to_string(),
        }
    })?;

    let config_path = dir.join("tokenizer_config.json");
    let config = read_json(&config_path)?.unwrap_or(Value::Null);
    let bos_token = token_text(config.get("bos_token"));
    let eos_token = token_text(config.get("eos_token"));
    let add_bos_token = config
        .get("add_bos_token")
        .and_then(Value::as_bool)
        .unwrap_or(false);

    // Recent transformers saves the template in its own file, which then takes precedence.
    let jinja_path = dir.join("chat_template.jinja");
    let chat_template = match std::fs::read_to_string(&jinja_path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            chat_template_field(&config, &config_path)?
        }
        Err(source) => {
            return Err(HfTokenizerError::Io {
                path: jinja_path,
                source,
            })
        }
    };

    let eos_id = eos_token.as_deref().and_then(|t| tokenizer.token_to_id(t));
    let eos_token_ids = stop_ids(
        &tokenizer,
        eos_id.into_iter().chain(generation_eos_ids(dir)?),
    );
    Ok(LoadedTokenizer {
        tokenizer,
        chat_template,
        bos_token,
        eos_token,
        eos_token_ids,
        add_bos_token,
    })
}
