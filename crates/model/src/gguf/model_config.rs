//! `ModelConfig` from GGUF metadata (`{arch}.*` keys) and the tensor list.

use super::metadata::Metadata;
use super::reader::TensorInfo;
use super::GgufError;
use crate::config::{Arch, BlockVariant, ModelConfig, RopeStyle};

const DEFAULT_ROPE_THETA: f32 = 10_000.0;

pub fn config_from_metadata(
    meta: &Metadata,
    tensors: &[TensorInfo],
) -> Result<ModelConfig, GgufError> {
    let arch_name = meta.str("general.architecture")?;
    let arch = match arch_name {
        "llama" => Arch::Llama,
        "qwen2" => Arch::Qwen2,
        other => return Err(GgufError::UnsupportedArch(other.to_string())),
    };
    let key = |suffix: &str| format!("{arch_name}.{suffix}");
    let has_tensor = |name: &str| tensors.iter().any(|t| t.name == name);

    let hidden_size = meta.usize(&key("embedding_length"))?;
    let num_heads = meta.usize(&key("attention.head_count"))?;
    if num_heads == 0 {
        return Err(GgufError::Corrupt(format!(
            "{} is 0",
            key("attention.head_count")
        )));
    }
    let num_kv_heads = meta
        .opt_usize(&key("attention.head_count_kv"))?
        .unwrap_or(num_heads);
    let head_dim = meta
        .opt_usize(&key("attention.key_length"))?
        .unwrap_or(hidden_size / num_heads);

    // The token list is the tokenizer's vocabulary; the embedding matrix is what the logits are
    // over. They agree in real files; when they do not the matrix wins, since it fixes the shapes.
    let embd_rows = tensors
        .iter()
        .find(|t| t.name == "token_embd.weight")
        .and_then(|t| t.dims.get(1).copied())
        .map(|n| n as usize);
    let token_count = meta
        .get("tokenizer.ggml.tokens")
        .and_then(|v| v.as_array())
        .map(|a| a.len());
    let vocab_size = embd_rows
        .or(token_count)
        .or(meta.opt_usize(&key("vocab_size"))?)
        .ok_or_else(|| GgufError::MissingKey("tokenizer.ggml.tokens".to_string()))?;

    Ok(ModelConfig {
        arch,
        vocab_size,
        hidden_size,
        intermediate_size: meta.usize(&key("feed_forward_length"))?,
        num_layers: meta.usize(&key("block_count"))?,
        num_heads,
        num_kv_heads,
        head_dim,
        rope_theta: meta
            .opt_f32(&key("rope.freq_base"))?
            .unwrap_or(DEFAULT_ROPE_THETA),
        // llama.cpp's converter permutes llama's Q/K rows for adjacent-pair rotation; qwen2 files
        // keep Hugging Face's layout and are run in NeoX (halves) mode.
        rope_style: match arch {
            Arch::Llama => RopeStyle::Interleaved,
            _ => RopeStyle::Halves,
        },
        rms_norm_eps: meta.f32(&key("attention.layer_norm_rms_epsilon"))?,
        max_position_embeddings: meta.usize(&key("context_length"))?,
        tie_word_embeddings: !has_tensor("output.weight"),
        qkv_bias: arch == Arch::Qwen2 || has_tensor("blk.0.attn_q.bias"),
        block: BlockVariant::llama(head_dim),
        rope_scaling: None,
        layer_attention: Vec::new(),
    })
}
