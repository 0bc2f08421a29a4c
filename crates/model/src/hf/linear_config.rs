//! The linear-attention part of a hybrid's `config.json` (qwen3_next, qwen3_5): the Gated
//! DeltaNet head counts and sizes, the convolution's taps, and which layers are linear
//! (`layer_types`, or every layer but each `full_attention_interval`-th).

use serde::Deserialize;

use super::HfError;
use crate::config::LinearAttention;

/// transformers' default spacing of full-attention layers in a hybrid.
const DEFAULT_FULL_ATTENTION_INTERVAL: usize = 4;

#[derive(Debug, Default, Deserialize)]
pub(crate) struct LinearFields {
    linear_num_key_heads: Option<usize>,
    linear_num_value_heads: Option<usize>,
    linear_key_head_dim: Option<usize>,
    linear_value_head_dim: Option<usize>,
    linear_conv_kernel_dim: Option<usize>,
    full_attention_interval: Option<usize>,
}

/// The config's linear-attention layers, `None` when it names none. `layer_types` entries
/// other than `linear_attention` and `full_attention` are refused.
pub(super) fn linear_attention_of(
    fields: &LinearFields,
    layer_types: Option<&[String]>,
    num_layers: usize,
) -> Result<Option<LinearAttention>, HfError> {
    let Some(num_key_heads) = fields.linear_num_key_heads else {
        return Ok(None);
    };
    let missing = |name: &str| {
        HfError::Unsupported(format!(
            "`{name}` is missing from a linear-attention config"
        ))
    };
    let layers = match layer_types {
        Some(types) => types
            .iter()
            .map(|t| match t.as_str() {
                "linear_attention" => Ok(true),
                "full_attention" => Ok(false),
                other => Err(HfError::Unsupported(format!(
                    "`layer_types` entry `{other}`: a hybrid's layers are linear_attention or \
                     full_attention"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?,
        None => {
            let interval = fields
                .full_attention_interval
                .unwrap_or(DEFAULT_FULL_ATTENTION_INTERVAL)
                .max(1);
            (0..num_layers).map(|i| (i + 1) % interval != 0).collect()
        }
    };
    Ok(Some(LinearAttention {
        layers,
        num_key_heads,
        num_value_heads: fields
            .linear_num_value_heads
            .ok_or_else(|| missing("linear_num_value_heads"))?,
        key_head_dim: fields
            .linear_key_head_dim
            .ok_or_else(|| missing("linear_key_head_dim"))?,
        value_head_dim: fields
            .linear_value_head_dim
            .ok_or_else(|| missing("linear_value_head_dim"))?,
        conv_kernel: fields
            .linear_conv_kernel_dim
            .ok_or_else(|| missing("linear_conv_kernel_dim"))?,
        tiled_value_heads: false,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fourth_layer_is_full_attention_unless_layer_types_say() {
        let fields = LinearFields {
            linear_num_key_heads: Some(2),
            linear_num_value_heads: Some(4),
            linear_key_head_dim: Some(16),
            linear_value_head_dim: Some(16),
            linear_conv_kernel_dim: Some(4),
            full_attention_interval: None,
        };
        let l = linear_attention_of(&fields, None, 8).unwrap().unwrap();
        assert_eq!(l.layers, [true, true, true, false, true, true, true, false]);
        let types = ["full_attention", "linear_attention"].map(String::from);
        let l = linear_attention_of(&fields, Some(&types), 2)
            .unwrap()
            .unwrap();
        assert_eq!(l.layers, [false, true]);
        let bad = ["sliding_attention".to_string()];
        assert!(linear_attention_of(&fields, Some(&bad), 1).is_err());
        let none = LinearFields::default();
        assert!(linear_attention_of(&none, None, 8).unwrap().is_none());
    }
}
