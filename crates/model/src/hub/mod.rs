//! Models from the Hugging Face hub: a hub id (`org/name`) resolved to a directory of the
//! standard Hugging Face cache, downloading what is missing through `hf-hub`.
//!
//! Honoured like `huggingface_hub` does: `HF_HOME` (the cache is `$HF_HOME/hub`),
//! `HF_HUB_CACHE` (the cache itself), `HF_ENDPOINT`, `HF_TOKEN` (else the token file
//! `huggingface-cli login` writes), `HF_HUB_OFFLINE`. Only the files the model needs are
//! fetched (see `files`); an interrupted download resumes from its `.part` file.

mod files;

use std::path::{Path, PathBuf};

use hf_hub::api::sync::{ApiBuilder, ApiError, ApiRepo};
use hf_hub::{Cache, Repo, RepoType};

use self::files::{plan, shards_of_index, WeightPlan, SAFETENSORS_INDEX};
use crate::progress::FileProgress;

/// hf-hub retries a broken transfer this many times, each from where it stopped.
const TRANSFER_RETRIES: usize = 5;
/// And ferrite retries a whole file (its metadata request included) this many times.
const FILE_ATTEMPTS: usize = 3;

#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(
        "`{repo}` (revision {revision}) is not in the Hugging Face cache at {cache} and \
         HF_HUB_OFFLINE is set: download it once without HF_HUB_OFFLINE{missing}"
    )]
    OfflineNotCached {
        repo: String,
        revision: String,
        cache: String,
        missing: String,
    },
    #[error(
        "`{repo}` was not found at {endpoint} (a private or gated model needs HF_TOKEN): {detail}"
    )]
    NotFound {
        repo: String,
        endpoint: String,
        detail: String,
    },
    #[error("cannot reach {endpoint} for `{repo}`: {detail}")]
    Unreachable {
        repo: String,
        endpoint: String,
        detail: String,
    },
    #[error("downloading `{file}` of `{repo}` failed: {detail}")]
    Download {
        repo: String,
        file: String,
        detail: String,
    },
    #[error("`{repo}` is not a model ferrite can load: {reason}")]
    NotAModel { repo: String, reason: String },
    #[error("model.safetensors.index.json: {0}")]
    BadIndex(String),
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Whether `spec` looks like a hub id (`org/name`) rather than a path. Callers check first
/// that no such path exists.
pub fn is_hub_id(spec: &str) -> bool {
    let mut parts = spec.split('/');
    let (Some(org), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let ok = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    ok(org) && ok(name)
}

/// The settings that come from the environment, read once.
#[derive(Debug, Clone)]
pub struct HubEnv {
    pub cache: PathBuf,
    pub endpoint: String,
    pub token: Option<String>,
    pub offline: bool,
}

fn truthy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "1" | "on" | "yes" | "true"
    )
}

impl HubEnv {
    pub fn from_env() -> HubEnv {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let cache = match var("HF_HUB_CACHE") {
            Some(dir) => PathBuf::from(dir),
            None => Cache::from_env().path().clone(),
        };
        let token = var("HF_TOKEN").or_else(|| Cache::new(cache.clone()).token());
        HubEnv {
            endpoint: var("HF_ENDPOINT")
                .map(|e| e.trim_end_matches('/').to_string())
                .unwrap_or_else(|| "https://huggingface.co".to_string()),
            token,
            offline: var("HF_HUB_OFFLINE").is_some_and(|v| truthy(&v)),
            cache,
        }
    }
}

/// The directory of `repo` at `revision` in the cache (a snapshot: symlinks to blobs), with
/// every file the model needs in it; downloads what is missing unless offline.
pub fn model_dir(repo: &str, revision: &str, env: &HubEnv) -> Result<PathBuf, HubError> {
    if env.offline {
        return cached_model_dir(repo, revision, env);
    }
    let api = ApiBuilder::from_cache(Cache::new(env.cache.clone()))
        .with_endpoint(env.endpoint.clone())
        .with_token(env.token.clone())
        .with_retries(TRANSFER_RETRIES)
        .with_progress(false)
        .build()
        .map_err(|e| unreachable(repo, env, e))?;
    let hub_repo = Repo::with_revision(repo.to_string(), RepoType::Model, revision.to_string());
    let api_repo = api.repo(hub_repo);
    let info = match api_repo.info() {
        Ok(info) => info,
        Err(e) if is_status(&e, &[401, 403, 404]) => {
            return Err(HubError::NotFound {
                repo: repo.to_string(),
                endpoint: env.endpoint.clone(),
                detail: e.to_string(),
            })
        }
        Err(e) => {
            // As huggingface_hub does: with the hub unreachable, a complete cached copy serves.
            return cached_model_dir(repo, revision, env).map_err(|_| unreachable(repo, env, e));
        }
    };
    let listed: Vec<String> = info.siblings.into_iter().map(|s| s.rfilename).collect();
    let (metadata, weights) = plan(repo, &listed)?;
    let snapshot = snapshot_dir(&env.cache, repo, &info.sha);
    let fetch = |file: &str| fetch_file(&api_repo, repo, &snapshot, file);
    for file in &metadata {
        fetch(file)?;
    }
    let weight_files = match weights {
        WeightPlan::Files(files) => files,
        WeightPlan::Sharded => {
            let index = fetch(SAFETENSORS_INDEX)?;
            shards_of_index(&read(&index)?)?
        }
    };
    for file in &weight_files {
        fetch(file)?;
    }
    let config = fetch("config.json")?;
    Ok(config.parent().map(Path::to_path_buf).unwrap_or(snapshot))
}

fn unreachable(repo: &str, env: &HubEnv, e: ApiError) -> HubError {
    HubError::Unreachable {
        repo: repo.to_string(),
        endpoint: env.endpoint.clone(),
        detail: e.to_string(),
    }
}

fn is_status(e: &ApiError, codes: &[u16]) -> bool {
    match e {
        ApiError::RequestError(inner) => {
            matches!(**inner, ureq::Error::Status(code, _) if codes.contains(&code))
        }
        _ => false,
    }
}

fn read(path: &Path) -> Result<String, HubError> {
    std::fs::read_to_string(path).map_err(|source| HubError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// `<cache>/models--org--name/snapshots/<commit>`.
fn snapshot_dir(cache: &Path, repo: &str, commit: &str) -> PathBuf {
    let folder = Repo::new(repo.to_string(), RepoType::Model).folder_name();
    cache.join(folder).join("snapshots").join(commit)
}

/// The cached file if this commit's snapshot has it, else a download (resumed if a `.part`
/// of it is there), retried a few times.
fn fetch_file(
    api_repo: &ApiRepo,
    repo: &str,
    snapshot: &Path,
    file: &str,
) -> Result<PathBuf, HubError> {
    let cached = snapshot.join(file);
    if cached.is_file() {
        return Ok(cached);
    }
    let mut attempt = 1;
    loop {
        match api_repo.download_with_progress(file, FileProgress::for_stderr()) {
            Ok(path) => return Ok(path),
            Err(e) if attempt < FILE_ATTEMPTS && !is_status(&e, &[401, 403, 404]) => {
                tracing::warn!(file, attempt, error = %e, "download failed, retrying");
                attempt += 1;
            }
            Err(e) => {
                return Err(HubError::Download {
                    repo: repo.to_string(),
                    file: file.to_string(),
                    detail: e.to_string(),
                })
            }
        }
    }
}

/// The cached snapshot of `repo` at `revision` (a branch or tag the cache has a ref for, or a
/// commit), when it holds every file the model needs.
fn cached_model_dir(repo: &str, revision: &str, env: &HubEnv) -> Result<PathBuf, HubError> {
    let not_cached = |missing: String| HubError::OfflineNotCached {
        repo: repo.to_string(),
        revision: revision.to_string(),
        cache: env.cache.display().to_string(),
        missing,
    };
    let folder = env
        .cache
        .join(Repo::new(repo.to_string(), RepoType::Model).folder_name());
    let commit = std::fs::read_to_string(folder.join("refs").join(revision))
        .map(|c| c.trim().to_string())
        .unwrap_or_else(|_| revision.to_string());
    let snapshot = folder.join("snapshots").join(&commit);
    let listed: Vec<String> = list_files(&snapshot);
    if listed.is_empty() {
        return Err(not_cached(String::new()));
    }
    let (_, weights) = plan(repo, &listed).map_err(|e| not_cached(format!(" ({e})")))?;
    let weight_files = match weights {
        WeightPlan::Files(files) => files,
        WeightPlan::Sharded => shards_of_index(&read(&snapshot.join(SAFETENSORS_INDEX))?)?,
    };
    let missing: Vec<&String> = weight_files
        .iter()
        .filter(|f| !snapshot.join(f).is_file())
        .collect();
    if !missing.is_empty() {
        return Err(not_cached(format!(" (missing {missing:?})")));
    }
    Ok(snapshot)
}

/// The files under `dir`, as paths relative to it with `/` separators; empty if none.
fn list_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(rel) = path.strip_prefix(dir) {
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests;
