//! Compiling a [`GrammarRequest`] into the engine's [`Constraint`]: the tokenizer's token
//! bytes become llguidance's token trie once (lazily, off any request's path after the first),
//! and compiled grammars are cached by their source text.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use ferrite_engine::Constraint;
use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};
use llguidance::{Matcher, ParserFactory};
use serde_json::{json, Value};
use tokenizers::Tokenizer;

use super::lru::Lru;
use super::matcher_constraint::CompiledGrammar;
use crate::error::ApiError;
use crate::openai::structured::{GrammarRequest, RequestedGrammar};

/// Compiled grammars kept, by source text.
const CACHE_CAPACITY: usize = 256;

/// JSON as the model writes it when unconstrained (`{"a": 1, "b": 2}`), with no whitespace
/// elsewhere: free whitespace lets a small model pad forever instead of answering.
const JSON_LAYOUT: &str =
    r#"{"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "}"#;

/// [`JSON_LAYOUT`] as the `x-guidance` value of a JSON schema.
pub(crate) fn json_layout() -> Value {
    serde_json::from_str(JSON_LAYOUT).unwrap_or_else(|_| json!({}))
}

/// The grammar engine of one model: shared by every handler (cheap to clone).
#[derive(Clone)]
pub struct Grammars {
    inner: Arc<Inner>,
}

struct Inner {
    tokenizer: Tokenizer,
    /// The model's vocabulary (logits rows); the tokenizer's may be smaller.
    vocab_size: usize,
    eos_token: Option<String>,
    factory: OnceLock<Result<ParserFactory, String>>,
    cache: Mutex<Lru<String, Constraint>>,
}

impl Grammars {
    pub fn new(tokenizer: Tokenizer, vocab_size: usize, eos_token: Option<String>) -> Self {
        Self {
            inner: Arc::new(Inner {
                tokenizer,
                vocab_size,
                eos_token,
                factory: OnceLock::new(),
                cache: Mutex::new(Lru::new(CACHE_CAPACITY)),
            }),
        }
    }

    /// The id of `text` when the tokenizer has it as one token (a tool-call marker).
    pub fn single_token_id(&self, text: &str) -> Option<u32> {
        self.inner.tokenizer.token_to_id(text)
    }

    /// Builds the token trie now, on a thread of its own, so that the first structured
    /// request does not wait for it.
    pub fn warm_up_in_background(&self) {
        let grammars = self.clone();
        let spawned = std::thread::Builder::new()
            .name("ferrite-grammar-init".into())
            .spawn(move || {
                if let Err(e) = grammars.factory() {
                    tracing::warn!("structured outputs unavailable: {}", e.message);
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot start the grammar warm-up thread: {e}");
        }
    }

    /// The constraint for `requested`, compiled on a blocking thread (never the async
    /// runtime's, never the scheduler's) unless cached. A grammar llguidance cannot compile or
    /// enforce (an unsupported schema keyword, a bad regex) is a 400 naming the field.
    pub async fn constraint(&self, requested: RequestedGrammar) -> Result<Constraint, ApiError> {
        let grammars = self.clone();
        tokio::task::spawn_blocking(move || grammars.constraint_blocking(&requested))
            .await
            .map_err(|e| ApiError::internal(format!("grammar compilation failed: {e}")))?
    }

    pub fn constraint_blocking(
        &self,
        requested: &RequestedGrammar,
    ) -> Result<Constraint, ApiError> {
        let (key, grammar) = top_level(&requested.grammar);
        let cache = &self.inner.cache;
        if let Some(hit) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(hit);
        }
        let factory = self.factory()?;
        let started = Instant::now();
        let parser = factory.create_parser(grammar).map_err(|e| {
            ApiError::invalid_param(
                requested.param,
                format!("the output constraint cannot be enforced: {e}"),
            )
        })?;
        let matcher = Matcher::new(Ok(parser));
        if let Some(e) = matcher.get_error() {
            return Err(ApiError::invalid_param(
                requested.param,
                format!("the output constraint cannot be enforced: {e}"),
            ));
        }
        tracing::debug!("compiled a grammar in {:?}", started.elapsed());
        let constraint = Constraint::new(CompiledGrammar::new(matcher));
        cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, constraint.clone());
        Ok(constraint)
    }

    fn factory(&self) -> Result<&ParserFactory, ApiError> {
        let inner = &*self.inner;
        inner
            .factory
            .get_or_init(|| {
                let started = Instant::now();
                let factory = build_factory(
                    &inner.tokenizer,
                    inner.vocab_size,
                    inner.eos_token.as_deref(),
                );
                tracing::info!(
                    "structured outputs: token trie built in {:?}",
                    started.elapsed()
                );
                factory
            })
            .as_ref()
            .map_err(|e| ApiError::internal(format!("structured outputs are unavailable: {e}")))
    }
}

/// The cache key and llguidance's grammar for a request.
fn top_level(requested: &GrammarRequest) -> (String, TopLevelGrammar) {
    match requested {
        GrammarRequest::JsonSchema(schema) => {
            let mut schema = schema.clone();
            if let Value::Object(map) = &mut schema {
                if !map.contains_key("x-guidance") {
                    map.insert("x-guidance".into(), json_layout());
                }
            }
            (
                format!("json\0{schema}"),
                TopLevelGrammar::from_json_schema(schema),
            )
        }
        GrammarRequest::Regex(rx) => (format!("regex\0{rx}"), TopLevelGrammar::from_regex(rx)),
        GrammarRequest::Choice(choices) => {
            let rx = choices
                .iter()
                .map(|c| escape_regex(c))
                .collect::<Vec<_>>()
                .join("|");
            (format!("regex\0{rx}"), TopLevelGrammar::from_regex(&rx))
        }
        GrammarRequest::Lark(lark) => (
            format!("lark\0{lark}"),
            TopLevelGrammar::from_lark(lark.clone()),
        ),
    }
}

/// `text` as a regex that matches it literally.
fn escape_regex(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// llguidance's view of the tokenizer: every token's bytes (from the tokenizer's JSON, as
/// llguidance reads it), padded to the model's vocabulary with tokens that never match.
fn build_factory(
    tokenizer: &Tokenizer,
    vocab_size: usize,
    eos_token: Option<&str>,
) -> Result<ParserFactory, String> {
    let text = tokenizer.to_string(false).map_err(|e| e.to_string())?;
    let json: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let mut token_bytes =
        llguidance::token_bytes_from_tokenizer_json(&json).map_err(|e| e.to_string())?;
    let vocab = vocab_size.max(token_bytes.len());
    token_bytes.resize(vocab, Vec::new());
    // llguidance needs an end token; which ids really end a generation is the engine's call.
    let eos = eos_token
        .and_then(|t| tokenizer.token_to_id(t))
        .unwrap_or(vocab as u32 - 1);
    let trie = TokTrie::from(&TokRxInfo::new(vocab as u32, eos), &token_bytes);
    let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie));
    let mut factory = ParserFactory::new_simple(&env).map_err(|e| e.to_string())?;
    factory.quiet();
    Ok(factory)
}
