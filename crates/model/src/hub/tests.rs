use super::*;

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrite-hub-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn offline_env(cache: &Path) -> HubEnv {
    HubEnv {
        cache: cache.to_path_buf(),
        // Nothing listens there: an offline lookup must not try.
        endpoint: "http://127.0.0.1:9".to_string(),
        token: None,
        offline: true,
    }
}

/// A cache laid out as hf-hub and huggingface_hub write it.
fn cached_snapshot(cache: &Path, repo: &str, commit: &str, files: &[&str]) -> PathBuf {
    let folder = cache.join(format!("models--{}", repo.replace('/', "--")));
    std::fs::create_dir_all(folder.join("refs")).unwrap();
    std::fs::write(folder.join("refs/main"), commit).unwrap();
    let snapshot = folder.join("snapshots").join(commit);
    std::fs::create_dir_all(&snapshot).unwrap();
    for file in files {
        std::fs::write(snapshot.join(file), b"{}").unwrap();
    }
    snapshot
}

#[test]
fn hub_ids_are_org_slash_name() {
    for id in [
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        "Qwen/Qwen2.5-0.5B",
        "a_b/c.d",
    ] {
        assert!(is_hub_id(id), "{id}");
    }
    for not in [
        "model.gguf",
        "/abs/dir",
        "a/b/c",
        "a/",
        "/a",
        "../x",
        "a b/c",
        "./m",
    ] {
        assert!(!is_hub_id(not), "{not}");
    }
}

#[test]
fn offline_flag_values_follow_huggingface_hub() {
    for yes in ["1", "ON", "yes", "True"] {
        assert!(truthy(yes), "{yes}");
    }
    for no in ["0", "off", "no", "false", ""] {
        assert!(!truthy(no), "{no}");
    }
}

#[test]
fn offline_uses_the_cached_snapshot_of_the_revision() {
    let cache = temp_dir("cached");
    let snapshot = cached_snapshot(
        &cache,
        "org/tiny",
        "abc123",
        &["config.json", "model.safetensors", "tokenizer.json"],
    );
    let dir = model_dir("org/tiny", "main", &offline_env(&cache)).unwrap();
    assert_eq!(dir, snapshot);
    // A commit id works without a ref.
    let dir = model_dir("org/tiny", "abc123", &offline_env(&cache)).unwrap();
    assert_eq!(dir, snapshot);
    std::fs::remove_dir_all(&cache).unwrap();
}

#[test]
fn offline_and_not_cached_is_an_error_naming_the_repo_and_the_cache() {
    let cache = temp_dir("empty");
    let err = model_dir("org/absent", "main", &offline_env(&cache)).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, HubError::OfflineNotCached { .. }), "{text}");
    assert!(text.contains("org/absent"), "{text}");
    assert!(text.contains("HF_HUB_OFFLINE"), "{text}");
    assert!(text.contains(&cache.display().to_string()), "{text}");
    std::fs::remove_dir_all(&cache).unwrap();
}

#[test]
fn offline_with_a_shard_missing_is_not_cached() {
    let cache = temp_dir("partial");
    let snapshot = cached_snapshot(&cache, "org/sharded", "c0ffee", &["config.json"]);
    std::fs::write(
        snapshot.join(SAFETENSORS_INDEX),
        r#"{"weight_map": {"x": "model-00001-of-00002.safetensors",
                            "y": "model-00002-of-00002.safetensors"}}"#,
    )
    .unwrap();
    std::fs::write(snapshot.join("model-00001-of-00002.safetensors"), b"").unwrap();
    let err = model_dir("org/sharded", "main", &offline_env(&cache)).unwrap_err();
    assert!(
        err.to_string().contains("model-00002-of-00002.safetensors"),
        "{err}"
    );
    std::fs::remove_dir_all(&cache).unwrap();
}
