//! Test support: locating the real test models and the fixtures (tests only).

use std::path::PathBuf;

pub const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
pub const QWEN_05B: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
pub const GEMMA3_270M: &str = "gemma-3-270m-q4_k_m.gguf";

pub fn models_dir() -> PathBuf {
    match std::env::var_os("FERRITE_MODELS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/ferrite/models"),
    }
}

/// The path of a real model; fails the test (never skips it) when the file is absent.
pub fn model_path(file: &str) -> PathBuf {
    let path = models_dir().join(file);
    assert!(
        path.is_file(),
        "test model {} not found: run scripts/fetch_models.sh first",
        path.display()
    );
    path
}

/// The repository root, for fixtures.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}
