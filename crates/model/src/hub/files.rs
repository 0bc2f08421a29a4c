//! Which files of a hub repository a model needs: its config, its tokenizer and chat template,
//! its generation config, and its safetensors weights -- not the PyTorch `.bin`, ONNX or GGUF
//! copies many repositories also carry.

use super::HubError;

/// Needed when the repository has them; only `config.json` is required.
pub const METADATA_FILES: &[&str] = &[
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
];

pub const SAFETENSORS_INDEX: &str = "model.safetensors.index.json";
const SINGLE_SAFETENSORS: &str = "model.safetensors";

/// Where the weights come from, decided from the repository's file list alone.
#[derive(Debug, PartialEq, Eq)]
pub enum WeightPlan {
    /// Fetch the index, then the shards its `weight_map` names.
    Sharded,
    /// These files.
    Files(Vec<String>),
}

/// The metadata files the repository has (`config.json` must be one) and how to get its
/// weights. `repo` names the repository in errors.
pub fn plan(repo: &str, files: &[String]) -> Result<(Vec<String>, WeightPlan), HubError> {
    let has = |f: &str| files.iter().any(|x| x == f);
    if !has("config.json") {
        return Err(HubError::NotAModel {
            repo: repo.to_string(),
            reason: no_config_reason(files),
        });
    }
    let metadata = METADATA_FILES
        .iter()
        .filter(|f| has(f))
        .map(|f| f.to_string())
        .collect();
    let weights = if has(SAFETENSORS_INDEX) {
        WeightPlan::Sharded
    } else if has(SINGLE_SAFETENSORS) {
        WeightPlan::Files(vec![SINGLE_SAFETENSORS.to_string()])
    } else {
        // Top-level *.safetensors only: subfolders hold other variants (onnx/, original/).
        let top: Vec<String> = files
            .iter()
            .filter(|f| f.ends_with(".safetensors") && !f.contains('/'))
            .cloned()
            .collect();
        if top.is_empty() {
            return Err(HubError::NotAModel {
                repo: repo.to_string(),
                reason: "it has no *.safetensors weights (ferrite reads safetensors, or a GGUF \
                         file given by path)"
                    .to_string(),
            });
        }
        WeightPlan::Files(top)
    };
    Ok((metadata, weights))
}

fn no_config_reason(files: &[String]) -> String {
    if files.iter().any(|f| f.ends_with(".gguf")) {
        "it has no config.json, only GGUF files: download the .gguf you want and give its path"
            .to_string()
    } else {
        "it has no config.json".to_string()
    }
}

/// The shard files the index names (the one parser: `hf::safetensors::shards_of_index`).
pub fn shards_of_index(text: &str) -> Result<Vec<String>, HubError> {
    crate::hf::shards_of_index(text).map_err(HubError::BadIndex)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_sharded_repository_needs_its_metadata_and_index_but_not_the_other_formats() {
        let files = names(&[
            ".gitattributes",
            "README.md",
            "config.json",
            "generation_config.json",
            "tokenizer.json",
            "tokenizer_config.json",
            "special_tokens_map.json",
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
            "model.safetensors.index.json",
            "pytorch_model.bin",
            "onnx/model.onnx",
        ]);
        let (metadata, weights) = plan("org/m", &files).unwrap();
        assert_eq!(
            metadata,
            names(&[
                "config.json",
                "generation_config.json",
                "tokenizer.json",
                "tokenizer_config.json"
            ])
        );
        assert_eq!(weights, WeightPlan::Sharded);
    }

    #[test]
    fn a_single_file_repository_needs_model_safetensors() {
        let files = names(&["config.json", "model.safetensors", "chat_template.jinja"]);
        let (metadata, weights) = plan("org/m", &files).unwrap();
        assert_eq!(metadata, names(&["config.json", "chat_template.jinja"]));
        assert_eq!(weights, WeightPlan::Files(names(&["model.safetensors"])));
    }

    #[test]
    fn unindexed_safetensors_at_the_top_level_are_all_taken() {
        let files = names(&[
            "config.json",
            "b.safetensors",
            "a.safetensors",
            "x/c.safetensors",
        ]);
        let (_, weights) = plan("org/m", &files).unwrap();
        assert_eq!(
            weights,
            WeightPlan::Files(names(&["b.safetensors", "a.safetensors"]))
        );
    }

    #[test]
    fn a_gguf_only_repository_is_refused_with_advice() {
        let err = plan("org/m-GGUF", &names(&["m.Q4_K_M.gguf"])).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("org/m-GGUF") && text.contains("GGUF"),
            "{text}"
        );
    }

    #[test]
    fn a_repository_without_safetensors_is_refused() {
        let err = plan("org/m", &names(&["config.json", "pytorch_model.bin"])).unwrap_err();
        assert!(err.to_string().contains("safetensors"), "{err}");
    }

    #[test]
    fn the_index_names_each_shard_once_and_no_path_outside_the_snapshot() {
        let index = r#"{"weight_map": {"a": "s2.safetensors", "b": "s1.safetensors",
                        "c": "s2.safetensors"}}"#;
        assert_eq!(
            shards_of_index(index).unwrap(),
            names(&["s1.safetensors", "s2.safetensors"])
        );
        let evil = r#"{"weight_map": {"a": "../../etc/passwd"}}"#;
        assert!(shards_of_index(evil).is_err());
    }
}
