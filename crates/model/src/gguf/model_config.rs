//! `ModelConfig` from GGUF metadata (`{arch}.*` keys) and the tensor list.

use super::metadata::Metadata;
use super::moe_config::moe_from_metadata;
use super::reader::TensorInfo;
use super::GgufError;
use crate::config::{Activation, Arch, BlockVariant, LayerAttention, ModelConfig, RopeStyle};

const DEFAULT_ROPE_THETA: f32 = 10_000.0;

pub fn config_from_metadata(
    meta: &Metadata,
    tensors: &[TensorInfo],
) -> Result<ModelConfig, GgufError> {
    let arch_name = meta.str("general.architecture")?;
    let arch = match arch_name {
        "llama" => Arch::Llama,
        "qwen2" => Arch::Qwen2,
        "qwen3" => Arch::Qwen3,
        // The MoE families keep their dense sibling's attention; `moe_config` reads the rest.
        "qwen2moe" => Arch::Qwen2,
        "qwen3moe" => Arch::Qwen3,
        "gemma3" => Arch::Gemma3,
        other => return Err(GgufError::UnsupportedArch(other.to_string())),
    };
    let key = |suffix: &str| format!("{arch_name}.{suffix}");
    refuse_unimplemented(meta, &key)?;
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

    let num_layers = meta.usize(&key("block_count"))?;
    Ok(ModelConfig {
        arch,
        vocab_size,
        hidden_size,
        intermediate_size: meta.usize(&key("feed_forward_length"))?,
        num_layers,
        num_heads,
        num_kv_heads,
        head_dim,
        rope_theta: meta
            .opt_f32(&key("rope.freq_base"))?
            .unwrap_or(DEFAULT_ROPE_THETA),
        // llama.cpp's converter permutes llama's Q/K rows for adjacent-pair rotation; the other
        // families keep Hugging Face's layout and run in NeoX (halves) mode.
        rope_style: match arch {
            Arch::Llama | Arch::Mistral => RopeStyle::Interleaved,
            Arch::Qwen2 | Arch::Qwen3 | Arch::Gemma3 => RopeStyle::Halves,
        },
        rms_norm_eps: meta.f32(&key("attention.layer_norm_rms_epsilon"))?,
        max_position_embeddings: meta.usize(&key("context_length"))?,
        tie_word_embeddings: !has_tensor("output.weight"),
        qkv_bias: arch == Arch::Qwen2 || has_tensor("blk.0.attn_q.bias"),
        block: block_variant(arch, hidden_size, head_dim),
        rope_scaling: None,
        layer_attention: layer_attention(meta, arch, &key)?,
        moe: moe_from_metadata(meta, tensors, arch_name, num_layers)?,
    })
}

/// Keys that would change the math in ways ferrite does not implement: refused by name rather
/// than run wrong.
fn refuse_unimplemented(meta: &Metadata, key: &dyn Fn(&str) -> String) -> Result<(), GgufError> {
    for suffix in [
        "attn_logit_softcapping",
        "final_logit_softcapping",
        "rope.scaling.type",
        "rope.scaling.factor",
    ] {
        let name = key(suffix);
        if meta.get(&name).is_some() {
            return Err(GgufError::Unsupported(format!("{name} is not implemented")));
        }
    }
    Ok(())
}

/// The decoder block of each family as llama.cpp's GGUF files store it.
fn block_variant(arch: Arch, hidden_size: usize, head_dim: usize) -> BlockVariant {
    let llama = BlockVariant::llama(head_dim);
    match arch {
        Arch::Llama | Arch::Mistral | Arch::Qwen2 => llama,
        Arch::Qwen3 => BlockVariant {
            qk_norm: true,
            ..llama
        },
        // llama.cpp's converter stores gemma's norm weights with the 1 of `(1 + w)` already
        // added, and scores with 1/sqrt(head_dim) (query_pre_attn_scalar is not in the file;
        // it equals head_dim for every Gemma 3 size but 27B, as llama.cpp assumes).
        Arch::Gemma3 => BlockVariant {
            qk_norm: true,
            norm_weight_offset: 0.0,
            post_norms: true,
            activation: Activation::GeluTanh,
            embedding_scale: (hidden_size as f32).sqrt(),
            attn_scale: 1.0 / (head_dim as f32).sqrt(),
        },
    }
}

/// Gemma 3 (as llama.cpp runs it): every sixth layer global with the file's rope base, the
/// others sliding over `attention.sliding_window` tokens with rope base 10,000.
fn layer_attention(
    meta: &Metadata,
    arch: Arch,
    key: &dyn Fn(&str) -> String,
) -> Result<Vec<LayerAttention>, GgufError> {
    if arch != Arch::Gemma3 {
        return Ok(Vec::new());
    }
    const GLOBAL_EVERY: usize = 6;
    const LOCAL_ROPE_THETA: f32 = 10_000.0;
    let window = meta.usize(&key("attention.sliding_window"))?;
    let theta = meta
        .opt_f32(&key("rope.freq_base"))?
        .unwrap_or(DEFAULT_ROPE_THETA);
    let layers = meta.usize(&key("block_count"))?;
    Ok((0..layers)
        .map(|layer| {
            let global = layer % GLOBAL_EVERY == GLOBAL_EVERY - 1;
            LayerAttention {
                sliding_window: (!global).then_some(window),
                rope_theta: if global { theta } else { LOCAL_ROPE_THETA },
                rope_scaled: global,
            }
        })
        .collect())
}
