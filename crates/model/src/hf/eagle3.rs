//! An EAGLE-3 head's `config.json`, in the two layouts heads are published in: the EAGLE /
//! SpecForge one (a Llama config with `draft_vocab_size` and an `eagle_config`) and the
//! `speculators` one (`speculators_model_type: "eagle3"`, the layer's config under
//! `transformer_layer_config`). Both give the decoder layer's config and the head's options
//! (`plan::Eagle3Options`).

use serde_json::Value;

use super::HfError;
use crate::plan::{default_aux_layers, Eagle3Options};

/// A head config read: its decoder layer's config as a `config.json` text, and its options.
#[derive(Debug)]
pub struct Eagle3Config {
    pub layer_config: String,
    pub options: Eagle3Options,
}

/// Reads a head's `config.json` for a target of `target_layers` layers and `target_hidden`
/// hidden size (the defaults of what the config leaves out).
pub fn eagle3_config(
    text: &str,
    target_layers: usize,
    target_hidden: usize,
) -> Result<Eagle3Config, HfError> {
    let top: Value = serde_json::from_str(text).map_err(HfError::Config)?;
    let unsupported = |what: &str| HfError::Unsupported(format!("EAGLE-3 head: {what}"));
    let speculators = top.get("speculators_model_type").is_some();
    let mut layer = if speculators {
        match top["speculators_model_type"].as_str() {
            Some("eagle3") => {}
            other => {
                return Err(unsupported(&format!(
                    "speculators_model_type {other:?} (only \"eagle3\" heads load here)"
                )))
            }
        }
        top.get("transformer_layer_config")
            .filter(|c| c.is_object())
            .cloned()
            .ok_or_else(|| unsupported("no `transformer_layer_config` object"))?
    } else {
        top.clone()
    };
    let flag = |key: &str| top.get(key).and_then(Value::as_bool).unwrap_or(false);
    for key in ["fc_norm", "norm_before_fc"] {
        if flag(key) {
            return Err(unsupported(&format!(
                "`{key}: true` (Eagle 3.1 input norms)"
            )));
        }
    }
    let eagle_config = top.get("eagle_config");
    if eagle_config
        .and_then(|c| c.get("use_aux_hidden_state"))
        .and_then(Value::as_bool)
        == Some(false)
    {
        return Err(unsupported(
            "`use_aux_hidden_state: false` (a head reading only the last hidden state)",
        ));
    }
    // speculators (and vLLM) name the layers whose input is read; EAGLE / SpecForge configs
    // name the layers whose output is, one lower.
    let aux_layers = match (
        top.get("eagle_aux_hidden_state_layer_ids"),
        eagle_config.and_then(|c| c.get("eagle_aux_hidden_state_layer_ids")),
    ) {
        (Some(ids), _) => layer_ids(ids, 0)?,
        (None, Some(ids)) if !ids.is_null() => layer_ids(ids, 1)?,
        _ => default_aux_layers(target_layers),
    };
    let usize_at = |key: &str| top.get(key).and_then(Value::as_u64).map(|v| v as usize);
    let vocab = layer
        .get("vocab_size")
        .and_then(Value::as_u64)
        .ok_or_else(|| unsupported("the layer config has no `vocab_size`"))?
        as usize;
    let options = Eagle3Options {
        aux_layers,
        draft_vocab: usize_at("draft_vocab_size").unwrap_or(vocab),
        target_hidden: usize_at("target_hidden_size").unwrap_or(target_hidden),
        // speculators' own default; the key is written by its converter and trainer.
        residual_normed: flag("norm_before_residual"),
        // In speculators `norm_output` feeds the normed state back; in SpecForge configs the
        // same key only says the LM head reads a normed state, which every head does.
        feed_normed: speculators && flag("norm_output"),
    };
    // The layer's own family reads the rest; the head's class names are no family's.
    if let Some(object) = layer.as_object_mut() {
        object.remove("architectures");
    }
    Ok(Eagle3Config {
        layer_config: layer.to_string(),
        options,
    })
}

/// Three layer ids from a JSON array, each plus `shift`.
fn layer_ids(ids: &Value, shift: usize) -> Result<[usize; 3], HfError> {
    let ids: Vec<usize> = ids
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_u64)
                .map(|v| v as usize + shift)
        })
        .into_iter()
        .flatten()
        .collect();
    ids.try_into().map_err(|ids: Vec<usize>| {
        HfError::Unsupported(format!(
            "EAGLE-3 head: {} auxiliary hidden-state layers (three are read)",
            ids.len()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAYER: &str = r#"{"model_type": "llama", "hidden_size": 64, "vocab_size": 1024}"#;

    #[test]
    fn an_eagle_config_names_layer_outputs_and_speculators_layer_inputs() {
        let eagle = r#"{"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
            "hidden_size": 64, "vocab_size": 1024, "draft_vocab_size": 256,
            "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28]}}"#;
        let c = eagle3_config(eagle, 32, 64).unwrap();
        assert_eq!(c.options.aux_layers, [2, 16, 29]);
        assert_eq!(c.options.draft_vocab, 256);
        assert!(!c.layer_config.contains("Eagle3"));
        let speculators = format!(
            r#"{{"speculators_model_type": "eagle3", "transformer_layer_config": {LAYER},
                "eagle_aux_hidden_state_layer_ids": [2, 16, 29], "norm_before_residual": true,
                "norm_output": true}}"#
        );
        let c = eagle3_config(&speculators, 32, 64).unwrap();
        assert_eq!(c.options.aux_layers, [2, 16, 29]);
        assert_eq!(c.options.draft_vocab, 1024);
        assert!(c.options.residual_normed && c.options.feed_normed);
        assert_eq!(
            c.layer_config,
            serde_json::from_str::<Value>(LAYER).unwrap().to_string()
        );
    }

    #[test]
    fn defaults_and_refusals() {
        let c = eagle3_config(LAYER, 32, 64).unwrap();
        assert_eq!(c.options.aux_layers, [2, 16, 29]);
        assert_eq!(c.options.target_hidden, 64);
        assert!(!c.options.residual_normed && !c.options.feed_normed);
        let refused = |text: &str| eagle3_config(text, 32, 64).unwrap_err().to_string();
        assert!(refused(r#"{"speculators_model_type": "mlp"}"#).contains("mlp"));
        assert!(refused(r#"{"speculators_model_type": "eagle3"}"#).contains("transformer"));
        let fc_norm = r#"{"model_type": "llama", "vocab_size": 8, "fc_norm": true}"#;
        assert!(refused(fc_norm).contains("fc_norm"));
        let two = r#"{"vocab_size": 8, "eagle_aux_hidden_state_layer_ids": [1, 2]}"#;
        assert!(refused(two).contains("2 auxiliary"));
    }
}
