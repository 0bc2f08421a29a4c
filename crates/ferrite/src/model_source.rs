//! Finding and loading the model a command names: a GGUF file, or the default model.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use ferrite_model::config::ModelConfig;
use ferrite_model::gguf::GgufFile;
use ferrite_model::tokenizer::LoadedTokenizer;
use ferrite_model::weights::ModelWeights;

/// What the CLI needs of a model: its shape and weights for the backend, its text side for the
/// server, and a name to serve it under.
pub struct LoadedModel {
    pub name: String,
    pub config: ModelConfig,
    /// Empty for dummy weights, which the backend draws itself.
    pub weights: ModelWeights,
    /// `Some(seed)`: `--load-format dummy`.
    pub dummy_seed: Option<u64>,
    pub tokenizer: LoadedTokenizer,
}

/// `--load-format dummy`: the shape from a preset or config.json, a tokenizer from `tokenizer`
/// (a .gguf file or a directory with tokenizer.json) or the synthetic byte-level one.
pub fn load_dummy(spec: &str, seed: u64, tokenizer: Option<&str>) -> anyhow::Result<LoadedModel> {
    let config = ferrite_model::dummy::config_for(spec)?;
    let tokenizer = match tokenizer {
        None => ferrite_model::tokenizer::synthetic_byte_tokenizer()?,
        Some(path) if path.ends_with(".gguf") => {
            let file =
                GgufFile::open(Path::new(path)).with_context(|| format!("opening {path}"))?;
            LoadedTokenizer::from_gguf_metadata(file.metadata())?
        }
        Some(path) => {
            let p = Path::new(path);
            let dir = if p.is_dir() {
                p
            } else {
                p.parent().unwrap_or(Path::new("."))
            };
            ferrite_model::tokenizer::tokenizer_from_hf_dir(dir)?
        }
    };
    let tokens = tokenizer.tokenizer.get_vocab_size(true);
    if tokens > config.vocab_size {
        bail!(
            "the tokenizer has {tokens} tokens but the `{spec}` model only {}",
            config.vocab_size
        );
    }
    Ok(LoadedModel {
        name: dummy_model_name(spec),
        config,
        weights: ModelWeights::default(),
        dummy_seed: Some(seed),
        tokenizer,
    })
}

/// The served name of a dummy model: the preset's name as given (`llama-3.1-8b`, dots and
/// all), or for a config.json the name of its directory.
fn dummy_model_name(spec: &str) -> String {
    let path = Path::new(spec);
    let is_config_file = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let named = if is_config_file {
        path.parent().and_then(|p| p.file_name())
    } else if path.is_dir() {
        path.file_name()
    } else {
        None
    };
    named
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| spec.to_string())
}

/// `$FERRITE_MODELS`, else `~/.cache/ferrite/models`.
pub fn models_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("FERRITE_MODELS") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".cache/ferrite/models")
}

pub fn load(spec: Option<&str>) -> anyhow::Result<LoadedModel> {
    let path = match spec {
        Some(s) => PathBuf::from(s),
        None => crate::default_model::ensure(&models_dir())?,
    };
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
    {
        return load_gguf(&path);
    }
    bail!(
        "cannot load `{}`: give a .gguf file (Hugging Face directories and hub ids are not wired into the CLI yet)",
        path.display()
    )
}

fn load_gguf(path: &Path) -> anyhow::Result<LoadedModel> {
    let file = GgufFile::open(path).with_context(|| format!("opening {}", path.display()))?;
    let config = file.config()?;
    let tokenizer = LoadedTokenizer::from_gguf_metadata(file.metadata())?;
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".to_string());
    Ok(LoadedModel {
        name,
        config,
        weights: file.weights(),
        dummy_seed: None,
        tokenizer,
    })
}
