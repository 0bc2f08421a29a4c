//! Finding and loading the model a command names: a GGUF file, a Hugging Face model directory,
//! a hub id (downloaded into the Hugging Face cache), or the default model.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use ferrite_model::config::ModelConfig;
use ferrite_model::gguf::GgufFile;
use ferrite_model::hf::GenerationDefaults;
use ferrite_model::hub::{self, HubEnv};
use ferrite_model::mapping::MapPages;
use ferrite_model::tokenizer::LoadedTokenizer;
use ferrite_model::weights::ModelWeights;

use crate::cli::{EngineArgs, LoadFormat};

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
    /// generation_config.json's sampling defaults (all unset for GGUF files).
    pub generation: GenerationDefaults,
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
        generation: GenerationDefaults::default(),
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

/// The model the engine flags name (`--load-format`, `--revision`, the pages for `--device`),
/// with its tokenizer: what every command that runs a model loads.
pub fn load_model(spec: Option<&str>, engine: &EngineArgs) -> anyhow::Result<LoadedModel> {
    match engine.load_format {
        LoadFormat::Auto => load(
            spec,
            engine.revision.as_deref(),
            engine.download_dir.as_deref(),
            engine.map_pages(),
        ),
        LoadFormat::Dummy => load_dummy(
            spec.ok_or_else(|| {
                anyhow::anyhow!("--load-format dummy needs --model PRESET|config.json")
            })?,
            engine.dummy_seed,
            engine.tokenizer.as_deref(),
        ),
    }
}

/// Where the files of the model a command names are: what MODEL resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelFiles {
    Gguf(PathBuf),
    /// A Hugging Face model directory (a hub id's cached snapshot), and the name it is served
    /// under.
    Dir {
        dir: PathBuf,
        name: String,
    },
}

/// The model `spec` names; `revision` (a branch, tag or commit) and `download_dir` (the hub
/// cache) only for a hub id; its weight files mapped in `pages`.
pub fn load(
    spec: Option<&str>,
    revision: Option<&str>,
    download_dir: Option<&Path>,
    pages: MapPages,
) -> anyhow::Result<LoadedModel> {
    load_files(&resolve(spec, revision, download_dir)?, pages)
}

/// The files `spec` names (a hub id downloaded first), or the default model's.
pub fn resolve(
    spec: Option<&str>,
    revision: Option<&str>,
    download_dir: Option<&Path>,
) -> anyhow::Result<ModelFiles> {
    let path = match spec {
        Some(s) => PathBuf::from(s),
        None => crate::default_model::ensure(&models_dir())?,
    };
    let is_gguf = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
    if path.exists() || is_gguf {
        if revision.is_some() {
            bail!("--revision is for hub ids; `{}` is a path", path.display());
        }
        if path.is_dir() {
            let name = path
                .canonicalize()
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "model".to_string());
            return Ok(ModelFiles::Dir { dir: path, name });
        }
        if is_gguf {
            return Ok(ModelFiles::Gguf(path));
        }
        bail!(
            "cannot load `{}`: give a .gguf file, a Hugging Face model directory or a hub id",
            path.display()
        );
    }
    let spec = path.to_string_lossy();
    if !hub::is_hub_id(&spec) {
        bail!("`{spec}` is neither a file, a directory nor a hub id (org/name)");
    }
    let revision = revision.unwrap_or("main");
    let mut env = HubEnv::from_env();
    if let Some(dir) = download_dir {
        env.cache = dir.to_path_buf();
    }
    let started = Instant::now();
    let dir = hub::model_dir(&spec, revision, &env)?;
    tracing::info!(
        repo = %spec,
        revision,
        dir = %dir.display(),
        seconds = started.elapsed().as_secs_f64(),
        "model files ready in the Hugging Face cache"
    );
    Ok(ModelFiles::Dir {
        dir,
        name: spec.into_owned(),
    })
}

/// The model in `files`, its weight files mapped in `pages`.
pub fn load_files(files: &ModelFiles, pages: MapPages) -> anyhow::Result<LoadedModel> {
    match files {
        ModelFiles::Gguf(path) => load_gguf(path, pages),
        ModelFiles::Dir { dir, name } => load_hf_dir(dir, name.clone(), pages),
    }
}

/// A directory with config.json, *.safetensors and the tokenizer files.
fn load_hf_dir(dir: &Path, name: String, pages: MapPages) -> anyhow::Result<LoadedModel> {
    if !dir.join("config.json").is_file() {
        bail!(
            "{} is not a Hugging Face model directory: it has no config.json",
            dir.display()
        );
    }
    let started = Instant::now();
    let (config, weights) = ferrite_model::load::hf_dir_with(dir, pages)
        .with_context(|| format!("loading the model in {}", dir.display()))?;
    let tokenizer = ferrite_model::tokenizer::tokenizer_from_hf_dir(dir)?;
    let generation = ferrite_model::hf::load_generation_defaults(dir)?;
    tracing::info!(
        model = %name,
        arch = ?config.arch,
        layers = config.num_layers,
        seconds = started.elapsed().as_secs_f64(),
        "loaded a Hugging Face model directory"
    );
    Ok(LoadedModel {
        name,
        config,
        weights,
        dummy_seed: None,
        tokenizer,
        generation,
    })
}

fn load_gguf(path: &Path, pages: MapPages) -> anyhow::Result<LoadedModel> {
    let file =
        GgufFile::open_with(path, pages).with_context(|| format!("opening {}", path.display()))?;
    let (config, weights) = file.model()?;
    let tokenizer = LoadedTokenizer::from_gguf_metadata(file.metadata())?;
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".to_string());
    Ok(LoadedModel {
        name,
        config,
        weights,
        dummy_seed: None,
        tokenizer,
        generation: GenerationDefaults::default(),
    })
}
