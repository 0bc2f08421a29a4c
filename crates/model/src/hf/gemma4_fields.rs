//! The fields of a Gemma 4 `config.json` (its `text_config`) that no other family has; what
//! they mean is `arch/families/gemma4.rs`'s. (`top_k_experts` is read as
//! `num_experts_per_tok`, `moe_config`.)

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Default, Deserialize)]
pub struct Gemma4Fields {
    /// The head size of full-attention layers (transformers' default 512 when absent).
    pub global_head_dim: Option<usize>,
    /// The KV heads of full-attention layers where `attention_k_eq_v` is set.
    pub num_global_key_value_heads: Option<usize>,
    pub attention_k_eq_v: Option<bool>,
    pub num_kv_shared_layers: Option<usize>,
    pub use_double_wide_mlp: Option<bool>,
    /// The width of the per-layer inputs (0 or null: none; transformers' default 256).
    pub hidden_size_per_layer_input: Option<usize>,
    pub vocab_size_per_layer_input: Option<usize>,
    pub enable_moe_block: Option<bool>,
    /// transformers 5's save of the two above: per layer index (a string), the overrides
    /// `head_dim` and `num_key_value_heads` (it then ignores `global_head_dim`).
    pub per_layer_config: Option<serde_json::Map<String, Value>>,
    /// `"all"` or `"vision"`: bidirectional attention (not implemented for text).
    pub use_bidirectional_attention: Option<Value>,
}
