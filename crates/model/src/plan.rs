//! The layer plan: what each decoder layer computes, and the tensors it reads under their
//! canonical names and shapes. Both backends build their weights by walking it and declare
//! what they run with one `supports(&ModelPlan)`; the forward passes read each layer's spec.
//!
//! New math is a new variant here (`Mixer`, `MlpSpec`): every backend's weight loader and
//! capability check matches these enums without a catch-all, so the compiler points at each
//! place that must learn it. A family whose block the plan already expresses only fills a
//! `ModelConfig` (crate::arch).

use crate::config::{Activation, LinearAttention, ModelConfig, MoeConfig, RopeStyle, ShapeError};
use crate::tensor_names::{
    LayerTensor, OUTPUT, OUTPUT_NORM, PER_LAYER_MODEL_PROJ, PER_LAYER_PROJ_NORM,
    PER_LAYER_TOKEN_EMBD, TOKEN_EMBD,
};

/// The whole model: the embedding, the layers in order, the final norm and the LM head.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelPlan {
    pub vocab_size: usize,
    pub hidden_size: usize,
    /// Token embeddings are multiplied by this (gemma: sqrt(hidden_size)); 1 otherwise.
    pub embedding_scale: f32,
    /// The LM head is the token embedding (no `output.weight`).
    pub tied_output: bool,
    /// Every RMSNorm of the model, the final one included.
    pub norm: NormSpec,
    pub layers: Vec<LayerSpec>,
    /// Gemma 4's per-layer inputs, computed once per step from the tokens and their embedding.
    pub per_layer_input: Option<PerLayerInputSpec>,
    /// Logits become `cap · tanh(logits / cap)`.
    pub final_logit_softcap: Option<f32>,
}

/// Gemma 4's per-layer inputs (PLE), per token: `e = per_layer_token_embd[token] ·
/// sqrt(width)` and `p = per_layer_model_proj · x0 / sqrt(hidden)` (x0 the scaled token
/// embedding), both `[layers, width]`; each layer's slice of `p` RMS-normed (weight
/// `per_layer_proj_norm`); the input of layer l is `(p_l + e_l) / sqrt(2)`. A layer adds
/// `post_norm(proj(gelu_tanh(inp_gate · x) * input_l))` to its output (`LayerSpec::per_layer_input`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerLayerInputSpec {
    pub width: usize,
    pub vocab_size: usize,
    pub layers: usize,
}

/// How every RMSNorm of a model scales: `x / rms(x) * (w + weight_offset)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NormSpec {
    pub eps: f32,
    /// 0 (`x * w`) or gemma's 1 (`x * (1 + w)`); backends may fold it into the weights.
    pub weight_offset: f32,
}

/// One decoder layer: `x += mixer(norm(x))`, then `x += mlp(norm(x))`, each output normed
/// once more before its add when `post_norms` is set (gemma3).
#[derive(Debug, Clone, PartialEq)]
pub struct LayerSpec {
    pub index: usize,
    pub hidden_size: usize,
    pub mixer: Mixer,
    pub mlp: MlpSpec,
    pub post_norms: bool,
    /// Gemma 4 (26B-A4B): a mixture of experts beside the dense MLP, the block's MLP output
    /// being `post_norm_1(mlp(h)) + post_norm_2(experts(pre_norm_2(x)))` (x the residual
    /// stream before the MLP), routed by `softmax(router · (rms_norm(x) · scale /
    /// sqrt(hidden)))`, the chosen top-k renormalised and multiplied by a scale per expert.
    pub experts_beside: Option<MoeConfig>,
    /// The width of this layer's per-layer input (`ModelPlan::per_layer_input`), if any.
    pub per_layer_input: Option<usize>,
    /// The layer's output is multiplied by its learned scalar (`LayerOutputScale`).
    pub output_scale: bool,
}

/// What mixes information across positions.
#[derive(Debug, Clone, PartialEq)]
pub enum Mixer {
    /// Softmax attention over the paged KV cache.
    Attention(AttentionSpec),
    /// Gated DeltaNet linear attention over a recurrent state per sequence (the state slot of
    /// `SeqBatch`), not the KV pages.
    LinearAttention(LinearAttentionSpec),
}

/// A Gated DeltaNet layer (qwen3_next, qwen3_5), step by step for one token `t`:
/// `qkv = conv(in_qkv · x)` (causal depthwise over the last `conv_kernel` tokens, then SiLU),
/// split into q, k (per key head, L2-normalised, q also scaled by `key_head_dim^-0.5`) and v;
/// per value head `h` (its key head: `key_head_of`):
/// `g = A[h] · softplus(alpha · x + dt_bias[h])`, `beta = sigmoid(beta · x)`,
/// `S = exp(g) · S`, `S += k ⊗ (beta · (v − Sᵀk))`, `o = Sᵀq`;
/// then `out = ssm_out · (rms_norm(o) · w · silu(gate · x))`, the norm per value head.
#[derive(Debug, Clone, PartialEq)]
pub struct LinearAttentionSpec {
    pub num_key_heads: usize,
    pub num_value_heads: usize,
    pub key_head_dim: usize,
    pub value_head_dim: usize,
    pub conv_kernel: usize,
    /// Value heads in tiled order (`LinearAttention::tiled_value_heads`): see `key_head_of`.
    pub tiled_value_heads: bool,
}

impl LinearAttentionSpec {
    fn of(l: &LinearAttention) -> Self {
        Self {
            num_key_heads: l.num_key_heads,
            num_value_heads: l.num_value_heads,
            key_head_dim: l.key_head_dim,
            value_head_dim: l.value_head_dim,
            conv_kernel: l.conv_kernel,
            tiled_value_heads: l.tiled_value_heads,
        }
    }
    /// The key (and query) head value head `h` reads.
    pub fn key_head_of(&self, h: usize) -> usize {
        if self.tiled_value_heads {
            h % self.num_key_heads
        } else {
            h / self.group()
        }
    }
    /// Width of all key heads (and of all query heads).
    pub fn key_dim(&self) -> usize {
        self.num_key_heads * self.key_head_dim
    }
    /// Width of all value heads.
    pub fn value_dim(&self) -> usize {
        self.num_value_heads * self.value_head_dim
    }
    /// Channels of the convolution: q, k and v stacked.
    pub fn conv_channels(&self) -> usize {
        2 * self.key_dim() + self.value_dim()
    }
    /// Value heads served by one key head.
    pub fn group(&self) -> usize {
        self.num_value_heads / self.num_key_heads
    }
    /// f32 values of one sequence's state in this layer: the convolution's last
    /// `conv_kernel - 1` inputs and every value head's `key_head_dim x value_head_dim` matrix.
    pub fn state_len(&self) -> usize {
        (self.conv_kernel - 1) * self.conv_channels()
            + self.num_value_heads * self.key_head_dim * self.value_head_dim
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct AttentionSpec {
    /// Width of the rows the Q, K, V (and output gate) projections read: the hidden size, or
    /// twice it in an EAGLE-3 head's layer (its input is [embedding; hidden state]).
    pub input_width: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    /// Biases on Q, K and V (qwen2).
    pub qkv_bias: bool,
    /// Per-head RMSNorm on Q and K after the projection, before RoPE (qwen3, gemma3).
    pub qk_norm: bool,
    pub rope: RopeSpec,
    /// `Some(w)`: each query sees the last `w` positions, itself included.
    pub window: Option<usize>,
    /// Scores are multiplied by this before the softmax.
    pub scale: f32,
    /// A learned per-head logit that joins every softmax's denominator (gpt-oss,
    /// `AttnSinks`).
    pub sinks: bool,
    /// The output projection has a bias (gpt-oss, `AttnOutputBias`).
    pub output_bias: bool,
    /// The output is multiplied by `sigmoid(gate · x)` before the output projection, one
    /// gate per query element (`AttnOutputGate`; qwen3_next, qwen3_5).
    pub output_gate: bool,
    /// Per-head RMSNorm without a weight on V (Gemma 4).
    pub v_norm: bool,
    /// No V projection: V is the K projection's output, before K's norm and RoPE (Gemma 4's
    /// `attention_k_eq_v`).
    pub values_are_keys: bool,
    /// `Some(layer)`: this layer computes no K/V and attends over `layer`'s pages (Gemma 4's
    /// KV-sharing layers; the producer runs first in every step).
    pub kv_source: Option<usize>,
}

/// RoPE of one layer: how a head's dimensions pair up and their frequencies (base and
/// scaling already applied: `ModelConfig::rope_inv_freq`).
#[derive(Debug, Clone, PartialEq)]
pub struct RopeSpec {
    pub style: RopeStyle,
    /// `rotary_dim / 2` inverse frequencies: RoPE turns the first `2 * inv_freq.len()`
    /// dimensions of each head (all of them but with a partial rotary factor).
    pub inv_freq: Vec<f32>,
}

/// The MLP: `down(act(gate(x)) * up(x))`, dense or as a mixture of experts of that form.
#[derive(Debug, Clone, PartialEq)]
pub enum MlpSpec {
    Gated {
        activation: Activation,
        width: usize,
    },
    Experts {
        activation: Activation,
        moe: MoeConfig,
    },
}

/// How a tensor is used, which decides how dummy weights draw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorRole {
    /// A projection (or a stack of expert projections, `[experts, rows, cols]`).
    Matrix,
    Bias,
    /// An RMSNorm weight, stored without the `NormSpec::weight_offset`.
    Norm,
    /// A vector of multipliers near 1 used as stored (a linear-attention layer's gated norm).
    Scale,
    /// Negative per-head decay rates (a linear-attention layer's `A`).
    DecayRate,
}

/// One tensor the forward pass reads.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorSpec {
    /// The canonical (GGUF) name.
    pub name: String,
    /// Rows first: `[out, in]` for a matrix.
    pub shape: Vec<usize>,
    pub role: TensorRole,
}

impl TensorSpec {
    fn new(name: String, shape: Vec<usize>, role: TensorRole) -> Self {
        Self { name, shape, role }
    }
    /// Output rows of a matrix (its first dimension).
    pub fn rows(&self) -> usize {
        self.shape[0]
    }
    /// Elements of one row (its last dimension).
    pub fn cols(&self) -> usize {
        self.shape[self.shape.len() - 1]
    }
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl ModelPlan {
    /// The plan of `c`, after the shape checks every backend needs (`ModelConfig::check_shape`).
    pub fn new(c: &ModelConfig) -> Result<ModelPlan, ShapeError> {
        c.check_shape()?;
        Ok(Self::of(c))
    }

    /// The plan of `c` without the shape checks: enough to name and draw its tensors.
    pub fn of(c: &ModelConfig) -> ModelPlan {
        let layers = (0..c.num_layers).map(|l| LayerSpec::of(c, l)).collect();
        let per_layer_input = c.block.per_layer_input.map(|p| PerLayerInputSpec {
            width: p.width,
            vocab_size: p.vocab_size,
            layers: c.num_layers,
        });
        ModelPlan {
            vocab_size: c.vocab_size,
            hidden_size: c.hidden_size,
            embedding_scale: c.block.embedding_scale,
            tied_output: c.tie_word_embeddings,
            norm: NormSpec {
                eps: c.rms_norm_eps,
                weight_offset: c.block.norm_weight_offset,
            },
            layers,
            per_layer_input,
            final_logit_softcap: c.block.final_logit_softcap,
        }
    }

    /// Every tensor of the model, in file order: the embedding, each layer's, the final norm,
    /// and the LM head unless tied.
    pub fn tensors(&self) -> Vec<TensorSpec> {
        let (vocab, hidden) = (self.vocab_size, self.hidden_size);
        let mut out = vec![self.embedding()];
        if let Some(p) = &self.per_layer_input {
            let all = p.layers * p.width;
            out.push(TensorSpec::new(
                PER_LAYER_TOKEN_EMBD.into(),
                vec![p.vocab_size, all],
                TensorRole::Matrix,
            ));
            out.push(TensorSpec::new(
                PER_LAYER_MODEL_PROJ.into(),
                vec![all, hidden],
                TensorRole::Matrix,
            ));
            out.push(TensorSpec::new(
                PER_LAYER_PROJ_NORM.into(),
                vec![p.width],
                TensorRole::Norm,
            ));
        }
        out.extend(self.layers.iter().flat_map(LayerSpec::tensors));
        out.push(TensorSpec::new(
            OUTPUT_NORM.into(),
            vec![hidden],
            TensorRole::Norm,
        ));
        if !self.tied_output {
            out.push(TensorSpec::new(
                OUTPUT.into(),
                vec![vocab, hidden],
                TensorRole::Matrix,
            ));
        }
        out
    }

    /// The token embedding, `[vocab, hidden]`.
    pub fn embedding(&self) -> TensorSpec {
        let shape = vec![self.vocab_size, self.hidden_size];
        TensorSpec::new(TOKEN_EMBD.into(), shape, TensorRole::Matrix)
    }
}

impl LayerSpec {
    pub(crate) fn of(c: &ModelConfig, layer: usize) -> LayerSpec {
        let attention = c.attention(layer);
        let linear = c.linear_attention.as_ref().filter(|l| l.is_linear(layer));
        let mixer = match linear {
            Some(l) => Mixer::LinearAttention(LinearAttentionSpec::of(l)),
            None => Mixer::Attention(AttentionSpec {
                input_width: c.hidden_size,
                num_heads: c.num_heads,
                num_kv_heads: c.num_kv_heads_at(layer),
                head_dim: c.head_dim_at(layer),
                qkv_bias: c.qkv_bias,
                qk_norm: c.block.qk_norm,
                rope: RopeSpec {
                    style: c.rope_style,
                    inv_freq: c.rope_inv_freq(layer),
                },
                window: attention.sliding_window,
                // YaRN multiplies the rotated q and k by its attention factor each.
                scale: c.block.attn_scale * c.rope_attention_factor(layer).powi(2),
                sinks: c.block.attn_sinks,
                output_bias: c.block.attn_output_bias,
                output_gate: c.block.attn_output_gate,
                v_norm: c.block.v_norm,
                values_are_keys: c.values_are_keys_at(layer),
                kv_source: c.kv_source(layer),
            }),
        };
        let activation = c.block.activation;
        let beside = c.block.experts_beside_mlp;
        let mlp = match c.moe_at(layer).filter(|_| !beside) {
            Some(moe) => MlpSpec::Experts {
                activation,
                moe: moe.clone(),
            },
            None => MlpSpec::Gated {
                activation,
                width: c.mlp_width_at(layer),
            },
        };
        LayerSpec {
            index: layer,
            hidden_size: c.hidden_size,
            mixer,
            mlp,
            post_norms: c.block.post_norms,
            experts_beside: c.moe_at(layer).filter(|_| beside).cloned(),
            per_layer_input: c.block.per_layer_input.map(|p| p.width),
            output_scale: c.block.layer_output_scale,
        }
    }

    /// The tensor `t` of this layer, `None` when the layer has none.
    pub fn tensor(&self, t: LayerTensor) -> Option<TensorSpec> {
        self.tensors()
            .into_iter()
            .find(|s| s.name == t.of(self.index))
    }

    /// The tensor `t`, or an error naming it: for loaders that walk a variant needing it.
    pub fn required(&self, t: LayerTensor) -> Result<TensorSpec, MissingTensor> {
        self.tensor(t).ok_or(MissingTensor(t.of(self.index)))
    }
}

impl AttentionSpec {
    /// Width of all query heads of a token.
    pub fn q_dim(&self) -> usize {
        self.num_heads * self.head_dim
    }
    /// Width of all key (or value) heads of a token.
    pub fn kv_dim(&self) -> usize {
        self.num_kv_heads * self.head_dim
    }
    /// Query heads sharing one KV head.
    pub fn group(&self) -> usize {
        self.num_heads / self.num_kv_heads
    }
}

/// A loader asked the plan for a tensor its layer's variant does not have: a backend bug.
#[derive(Debug, thiserror::Error)]
#[error("the layer plan has no tensor `{0}`")]
pub struct MissingTensor(String);

pub mod eagle3;
mod mtp;
mod tensors;
#[cfg(test)]
mod tests;

pub use eagle3::{default_aux_layers, Eagle3Options, Eagle3Spec};
pub use mtp::MtpSpec;
