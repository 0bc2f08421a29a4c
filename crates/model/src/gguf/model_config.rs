//! GGUF metadata (`{arch}.*` keys) and the tensor list, read generically into the parts of a
//! `ModelConfig` every family stores the same way; a family (`crate::arch::families`) adds its
//! block, RoPE layout and layer pattern.

use super::metadata::Metadata;
use super::moe_config::moe_from_metadata;
use super::reader::TensorInfo;
use super::GgufError;
use crate::config::{Arch, BlockVariant, ModelConfig, RopeStyle};

/// llama.cpp's rope base when a file gives none.
const DEFAULT_ROPE_THETA: f32 = 10_000.0;

/// A GGUF file's metadata and tensor list, as a family reads them.
pub struct GgufConfig<'a> {
    pub meta: &'a Metadata,
    pub tensors: &'a [TensorInfo],
}

impl<'a> GgufConfig<'a> {
    /// `general.architecture`: the prefix of the model's keys and what picks its family.
    pub fn arch_name(&self) -> &'a str {
        self.meta.str("general.architecture").unwrap_or("")
    }

    /// The full name of the model key `suffix` (`{arch}.{suffix}`).
    pub fn key(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.arch_name())
    }

    pub fn has_tensor(&self, name: &str) -> bool {
        self.tensors.iter().any(|t| t.name == name)
    }

    /// The rope base of full-attention layers.
    pub fn rope_theta(&self) -> Result<f32, GgufError> {
        Ok(self
            .meta
            .opt_f32(&self.key("rope.freq_base"))?
            .unwrap_or(DEFAULT_ROPE_THETA))
    }

    /// The config every family's file gives the same way: sizes, norms, tying and experts read
    /// from the file, llama's block, one rope for every layer, a QKV bias where the file has
    /// one. `renormalise_experts` is the family's default for `expert_weights_norm`.
    pub fn base(
        &self,
        arch: Arch,
        rope_style: RopeStyle,
        renormalise_experts: bool,
    ) -> Result<ModelConfig, GgufError> {
        self.base_with(arch, rope_style, renormalise_experts, false)
    }

    /// [`GgufConfig::base`] for a family that reads the file's rope scaling itself
    /// (`rope_scaling_read`: its `rope.scaling.*` keys are then not refused here).
    pub fn base_with(
        &self,
        arch: Arch,
        rope_style: RopeStyle,
        renormalise_experts: bool,
        rope_scaling_read: bool,
    ) -> Result<ModelConfig, GgufError> {
        let key = |suffix: &str| self.key(suffix);
        refuse_unimplemented(self.meta, &key, rope_scaling_read)?;
        let meta = self.meta;
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

        // The token list is the tokenizer's vocabulary; the embedding matrix is what the logits
        // are over. They agree in real files; when they do not the matrix wins, since it fixes
        // the shapes.
        let embd_rows = self
            .tensors
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
            // Absent where every MLP is a mixture of experts (qwen35moe).
            intermediate_size: meta.opt_usize(&key("feed_forward_length"))?.unwrap_or(0),
            num_layers,
            num_heads,
            num_kv_heads,
            head_dim,
            rope_theta: self.rope_theta()?,
            rope_style,
            rms_norm_eps: meta.f32(&key("attention.layer_norm_rms_epsilon"))?,
            max_position_embeddings: meta.usize(&key("context_length"))?,
            tie_word_embeddings: !self.has_tensor("output.weight"),
            qkv_bias: self.has_tensor("blk.0.attn_q.bias"),
            block: BlockVariant::llama(head_dim),
            rope_scaling: None,
            layer_attention: Vec::new(),
            moe: moe_from_metadata(
                meta,
                self.tensors,
                self.arch_name(),
                num_layers,
                renormalise_experts,
            )?,
            linear_attention: None,
        })
    }
}

/// Keys that would change the math in ways ferrite does not implement: refused by name rather
/// than run wrong.
fn refuse_unimplemented(
    meta: &Metadata,
    key: &dyn Fn(&str) -> String,
    rope_scaling_read: bool,
) -> Result<(), GgufError> {
    let scaling: &[&str] = if rope_scaling_read {
        &[]
    } else {
        &["rope.scaling.type", "rope.scaling.factor"]
    };
    for suffix in ["attn_logit_softcapping", "final_logit_softcapping"]
        .iter()
        .chain(scaling)
    {
        let name = key(suffix);
        if meta.get(&name).is_some() {
            return Err(GgufError::Unsupported(format!("{name} is not implemented")));
        }
    }
    Ok(())
}
