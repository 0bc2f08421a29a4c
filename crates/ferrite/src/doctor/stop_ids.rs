//! The stop ids check: every file that names the end-of-sequence token (GGUF metadata,
//! tokenizer_config.json, generation_config.json, config.json) names ids the others agree with
//! and the vocabulary has, and the token the chat template ends a turn with stops generation.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Context;
use ferrite_model::gguf::GgufFile;
use serde_json::Value;

use super::report::Check;
use crate::model_source::ModelFiles;

const NAME: &str = "stop ids";
pub const GENERATION_CONFIG: &str = "generation_config.json eos_token_id";

/// The ids one file names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub name: String,
    /// As written: an id far out of range stays visible.
    pub ids: Vec<u64>,
}

/// What the files say, before any comparison.
#[derive(Debug, Default)]
pub struct Sources {
    pub sources: Vec<Source>,
    /// Problems found reading them (a token text the vocabulary lacks, a file that is not
    /// JSON): each an error.
    pub problems: Vec<String>,
}

/// Reads every source `files` has; `token_id` looks a token's text up in the tokenizer.
pub fn read(files: &ModelFiles, token_id: &dyn Fn(&str) -> Option<u32>) -> Sources {
    let mut found = Sources::default();
    match files {
        ModelFiles::Gguf(path) => match gguf_ids(path) {
            Ok(ids) if !ids.is_empty() => found.sources.push(Source {
                name: "GGUF tokenizer.ggml.eos/eot/eom_token_id".into(),
                ids,
            }),
            Ok(_) => {}
            Err(e) => found.problems.push(format!("{e:#}")),
        },
        ModelFiles::Dir { dir, .. } => read_dir(dir, token_id, &mut found),
    }
    found
}

fn gguf_ids(path: &Path) -> anyhow::Result<Vec<u64>> {
    let file = GgufFile::open(path).with_context(|| format!("opening {}", path.display()))?;
    let meta = file.metadata();
    let mut ids = Vec::new();
    for key in ["eos_token_id", "eot_token_id", "eom_token_id"] {
        if let Some(id) = meta.opt_usize(&format!("tokenizer.ggml.{key}"))? {
            push_new(&mut ids, id as u64);
        }
    }
    Ok(ids)
}

fn read_dir(dir: &Path, token_id: &dyn Fn(&str) -> Option<u32>, found: &mut Sources) {
    let json = |file: &str, found: &mut Sources| -> Option<Value> {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path).ok()?;
        match serde_json::from_str(&text) {
            Ok(v) => Some(v),
            Err(e) => {
                found
                    .problems
                    .push(format!("{file} is not valid JSON: {e}"));
                None
            }
        }
    };
    if let Some(config) = json("tokenizer_config.json", found) {
        if let Some(text) = token_text(config.get("eos_token")) {
            match token_id(&text) {
                Some(id) => found.sources.push(Source {
                    name: format!("tokenizer_config.json eos_token {text:?}"),
                    ids: vec![u64::from(id)],
                }),
                None => found.problems.push(format!(
                    "tokenizer_config.json's eos_token {text:?} is not a token of the tokenizer"
                )),
            }
        }
    }
    if let Some(ids) = json("generation_config.json", found).and_then(|c| ids_field(&c)) {
        found.sources.push(Source {
            name: GENERATION_CONFIG.into(),
            ids,
        });
    }
    if let Some(config) = json("config.json", found) {
        let ids = ids_field(&config).or_else(|| config.get("text_config").and_then(ids_field));
        if let Some(ids) = ids {
            found.sources.push(Source {
                name: "config.json eos_token_id".into(),
                ids,
            });
        }
    }
}

/// A special token as tokenizer_config.json writes it: `"<s>"` or `{"content": "<s>"}`.
fn token_text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
}

/// `eos_token_id`: one id or a list; `None` when absent or null.
fn ids_field(config: &Value) -> Option<Vec<u64>> {
    match config.get("eos_token_id")? {
        Value::Array(items) => Some(items.iter().filter_map(Value::as_u64).collect()),
        v => v.as_u64().map(|id| vec![id]),
    }
}

fn push_new(ids: &mut Vec<u64>, id: u64) {
    if !ids.contains(&id) {
        ids.push(id);
    }
}

/// Pairs of sources that disagree. generation_config.json is the list transformers and vLLM
/// stop on: every other source's ids must be in it (Qwen's config.json names <|endoftext|>,
/// its tokenizer_config.json <|im_end|>, and its generation_config.json both). Without it,
/// of two sources one must hold the other's ids.
pub fn disagreements(sources: &[Source]) -> Vec<String> {
    let set = |s: &Source| s.ids.iter().copied().collect::<BTreeSet<u64>>();
    let show = |s: &Source| format!("{} {:?}", s.name, s.ids);
    let mut out = Vec::new();
    if let Some(reference) = sources.iter().find(|s| s.name == GENERATION_CONFIG) {
        let all = set(reference);
        for s in sources.iter().filter(|s| s.name != GENERATION_CONFIG) {
            if !set(s).is_subset(&all) {
                out.push(format!("{} is not in {}", show(s), show(reference)));
            }
        }
        return out;
    }
    for (i, a) in sources.iter().enumerate() {
        for b in &sources[i + 1..] {
            let (sa, sb) = (set(a), set(b));
            if !sa.is_subset(&sb) && !sb.is_subset(&sa) {
                out.push(format!("{} differs from {}", show(a), show(b)));
            }
        }
    }
    out
}

/// What the check compares, besides the files.
pub struct Facts<'a> {
    /// Ids must be below this: the smaller of the tokenizer's and the model's vocabulary.
    pub vocab: usize,
    /// What ferrite stops on (the loader's list: eos, generation_config's, end-of-turn tokens).
    pub stop_ids: &'a [u32],
    /// The token the template ends the assistant's turn with, and its id.
    pub end_of_turn: Option<(&'a str, Option<u32>)>,
    /// A token's text, for the messages.
    pub name_of: &'a dyn Fn(u32) -> Option<String>,
}

pub fn check(found: &Sources, facts: &Facts) -> Check {
    let mut errors = found.problems.clone();
    let mut fixes: Vec<String> = Vec::new();
    for s in &found.sources {
        let outside: Vec<u64> = s
            .ids
            .iter()
            .copied()
            .filter(|&id| id >= facts.vocab as u64)
            .collect();
        if !outside.is_empty() {
            errors.push(format!(
                "{} names {outside:?}, outside the vocabulary (ids below {})",
                s.name, facts.vocab
            ));
        }
    }
    if !errors.is_empty() {
        fixes.push(format!(
            "name the end token's id (below {}) in each file; the model can never emit an id \
             outside its vocabulary",
            facts.vocab
        ));
    }
    if facts.stop_ids.is_empty() {
        errors.push("no source names an EOS token: answers run to max_tokens".into());
        fixes.push(
            "set eos_token_id in generation_config.json (or the GGUF's \
                    tokenizer.ggml.eos_token_id)"
                .into(),
        );
    }
    let mut warnings = disagreements(&found.sources);
    if !warnings.is_empty() {
        fixes.push(format!(
            "make the files name the same end tokens (generation_config.json's eos_token_id \
             lists every id that ends a turn); ferrite stops on all of them, {}, so a wrong \
             id ends answers early",
            show_ids(facts.stop_ids, facts.name_of)
        ));
    }
    if let Some((token, id)) = facts.end_of_turn {
        if !id.is_some_and(|id| facts.stop_ids.contains(&id)) {
            warnings.push(format!(
                "the chat template ends the assistant's turn with {token} ({}), which is not a \
                 stop id: answers run on past the turn",
                id.map_or("not a token".to_string(), |id| format!("id {id}"))
            ));
            fixes.push(format!(
                "add {token}'s id to generation_config.json's eos_token_id"
            ));
        }
    }
    let problems: Vec<String> = errors.iter().chain(&warnings).cloned().collect();
    if !errors.is_empty() {
        return Check::error(NAME, problems.join("; "), fixes.join("; "));
    }
    if !warnings.is_empty() {
        return Check::warning(NAME, problems.join("; "), fixes.join("; "));
    }
    let sources: Vec<String> = found
        .sources
        .iter()
        .map(|s| format!("{} {:?}", s.name, s.ids))
        .collect();
    let agree = match sources.len() {
        0 => "no file names one; the loader found them in the vocabulary".to_string(),
        1 => format!("from {}", sources[0]),
        _ => format!("{} agree", sources.join(", ")),
    };
    let turn = facts
        .end_of_turn
        .map(|(t, _)| format!("; the template's turn ends with {t}, a stop id"))
        .unwrap_or_default();
    Check::ok(
        NAME,
        format!(
            "generation stops on {} ({agree}){turn}",
            show_ids(facts.stop_ids, facts.name_of)
        ),
    )
}

/// `[2 <|im_end|>, 0 <|endoftext|>]`.
fn show_ids(ids: &[u32], name_of: &dyn Fn(u32) -> Option<String>) -> String {
    let shown: Vec<String> = ids
        .iter()
        .map(|&id| match name_of(id) {
            Some(name) => format!("{id} {name}"),
            None => id.to_string(),
        })
        .collect();
    format!("[{}]", shown.join(", "))
}

#[cfg(test)]
mod tests;
