//! The shape of a decoder-only transformer, whichever file it came from.

mod layers;

/// The decoder block lineage a config follows (its family, `crate::arch`, decides it):
/// informational once loaded (logs, tests), since the forward passes read the switches of
/// `ModelConfig`, never this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// Llama and its relatives (SmolLM2): no QKV bias.
    Llama,
    /// Qwen2 / Qwen2.5: bias on Q, K and V.
    Qwen2,
    /// Qwen3 (dense): per-head RMSNorm on Q and K, no bias, head_dim set by the config.
    Qwen3,
    /// Mistral: llama's block, optionally with sliding-window attention.
    Mistral,
    /// Gemma 3 (text): (1 + w) norms around attention and the MLP, GeGLU (tanh GELU), scaled
    /// embeddings, Q/K norms, sliding and global layers with their own rope bases.
    Gemma3,
    /// The Qwen hybrids (qwen3_5, qwen3_5_moe, qwen3_next): Gated DeltaNet linear-attention
    /// layers between gated-output attention layers with partial RoPE.
    Qwen3_5,
    /// gpt-oss: attention sinks, sliding and full layers alternating, YaRN, biased experts
    /// with a clamped SwiGLU.
    GptOss,
    /// Gemma 4 (text): sliding and wider global layers (proportional RoPE, keys as values),
    /// per-layer inputs, KV shared by the last layers, experts beside the MLP (26B-A4B).
    Gemma4,
}

/// How RoPE pairs up the dimensions of a head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs (x[2i], x[2i+1]): GGML's "normal" mode, which GGUF llama files expect
    /// (the converter permuted Q/K rows for it).
    Interleaved,
    /// Halves (x[i], x[i + d/2]): Hugging Face's rotate_half, GGML's NeoX mode (qwen2).
    Halves,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    pub arch: Arch,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub rope_theta: f32,
    pub rope_style: RopeStyle,
    pub rms_norm_eps: f32,
    /// Trained context length.
    pub max_position_embeddings: usize,
    /// lm_head shares the token embedding matrix.
    pub tie_word_embeddings: bool,
    pub qkv_bias: bool,
    /// The switches that tell one decoder block apart from another (llama's by default).
    pub block: BlockVariant,
    /// RoPE frequency scaling of full-attention layers (Llama 3.x); `None`: plain RoPE.
    pub rope_scaling: Option<RopeScaling>,
    /// One entry per layer: its attention window and rope base. Empty means every layer is
    /// full attention with `rope_theta` (llama, qwen2, qwen3 and GGUF files of those).
    pub layer_attention: Vec<LayerAttention>,
    /// Mixture-of-experts MLPs (qwen3_moe, qwen2_moe, mixtral); `None`: every MLP is dense.
    pub moe: Option<MoeConfig>,
    /// Gated DeltaNet linear-attention layers of a hybrid (qwen3_next, qwen3_5); `None`: every
    /// layer is softmax attention.
    pub linear_attention: Option<LinearAttention>,
}

/// A hybrid's linear-attention (Gated DeltaNet) layers: per head, a state `S` of
/// `key_head_dim x value_head_dim` updated by the gated delta rule at every token, read by the
/// query; q, k and v pass a causal depthwise convolution first. Key heads serve
/// `num_value_heads / num_key_heads` consecutive value heads each.
#[derive(Debug, Clone, PartialEq)]
pub struct LinearAttention {
    /// One entry per layer: whether it is a linear-attention layer (`layer_types`).
    pub layers: Vec<bool>,
    pub num_key_heads: usize,
    pub num_value_heads: usize,
    pub key_head_dim: usize,
    pub value_head_dim: usize,
    /// Taps of the causal depthwise convolution (`linear_conv_kernel_dim`).
    pub conv_kernel: usize,
    /// Value head `h` reads key head `h % num_key_heads` (llama.cpp's `qwen35` GGUF files
    /// store the value heads in that tiled order); else `h / (num_value_heads /
    /// num_key_heads)`, as Hugging Face checkpoints do.
    pub tiled_value_heads: bool,
}

impl LinearAttention {
    /// Whether layer `layer` is a linear-attention layer.
    pub fn is_linear(&self, layer: usize) -> bool {
        self.layers.get(layer).copied().unwrap_or(false)
    }
}

/// A mixture-of-experts MLP: a router scores `num_experts` SwiGLU experts per token
/// (softmax over all of them, in f32), the `experts_per_token` best run and their outputs are
/// summed weighted by their probabilities. The dense layers of the same model (`sparse_layers`
/// false) use `ModelConfig::intermediate_size`.
#[derive(Debug, Clone, PartialEq)]
pub struct MoeConfig {
    pub num_experts: usize,
    pub experts_per_token: usize,
    /// Width of one expert's MLP (`moe_intermediate_size`; Mixtral's `intermediate_size`).
    pub expert_intermediate_size: usize,
    /// The chosen probabilities are divided by their sum (qwen3's `norm_topk_prob`; always for
    /// Mixtral, whose softmax over the chosen logits is the same thing); else used as they are.
    pub norm_topk_prob: bool,
    /// qwen2_moe's shared expert: a dense SwiGLU MLP of this width run on every token, its output
    /// scaled by `sigmoid(shared_expert_gate · x)` and added to the experts'.
    pub shared_expert_intermediate_size: Option<usize>,
    /// One entry per layer: whether its MLP is the sparse one (`decoder_sparse_step`,
    /// `mlp_only_layers`).
    pub sparse_layers: Vec<bool>,
    /// The router and every expert projection have biases (gpt-oss).
    pub biases: bool,
}

impl MoeConfig {
    /// Whether layer `layer`'s MLP is a mixture of experts.
    pub fn is_sparse(&self, layer: usize) -> bool {
        self.sparse_layers.get(layer).copied().unwrap_or(false)
    }
}

pub use crate::rope_scaling::{rope_inv_freq, Llama3Scaling, RopeScaling, YarnScaling};

/// The MLP's activation: `act(gate(x)) * up(x)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Activation {
    /// SiLU (SwiGLU): llama, qwen, mistral.
    #[default]
    Silu,
    /// GELU with the tanh approximation (GeGLU): gemma (`gelu_pytorch_tanh`).
    GeluTanh,
    /// gpt-oss's clamped SwiGLU: `g = min(gate, L)`, `u = clamp(up, -L, L)`,
    /// `(u + 1) · g · sigmoid(α g)` with α = [`CLAMPED_SWIGLU_ALPHA`], L = [`CLAMPED_SWIGLU_LIMIT`].
    ClampedSwiglu,
}

/// gpt-oss's `swiglu_alpha` and `swiglu_limit` (configs with other values are refused).
pub const CLAMPED_SWIGLU_ALPHA: f32 = 1.702;
pub const CLAMPED_SWIGLU_LIMIT: f32 = 7.0;

/// Where decoder blocks of different families differ, as data: one forward pass reads these.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockVariant {
    /// Per-head RMSNorm on Q and K after the projection, before RoPE (qwen3, gemma3).
    pub qk_norm: bool,
    /// Added to every RMSNorm weight: 0 (`x * w`) or 1 (gemma's `x * (1 + w)`). Backends may
    /// fold it into the weights at load.
    pub norm_weight_offset: f32,
    /// RMSNorm on the attention output and on the MLP output before each residual add
    /// (gemma3's post_attention_layernorm and post_feedforward_layernorm).
    pub post_norms: bool,
    pub activation: Activation,
    /// Token embeddings are multiplied by this (gemma: sqrt(hidden_size)); 1 otherwise.
    pub embedding_scale: f32,
    /// Attention scores are multiplied by this: 1/sqrt(head_dim), or gemma3's
    /// query_pre_attn_scalar^-0.5.
    pub attn_scale: f32,
    /// The query projection also yields a gate per query element: the attention output is
    /// multiplied by `sigmoid(gate)` before the output projection (qwen3_next, qwen3_5).
    pub attn_output_gate: bool,
    /// RoPE turns only the first this many dimensions of each head (`partial_rotary_factor`);
    /// `None`: all of them.
    pub rotary_dim: Option<usize>,
    /// A learned logit per query head joins every softmax's denominator (gpt-oss's sinks).
    pub attn_sinks: bool,
    /// The attention's output projection has a bias (gpt-oss).
    pub attn_output_bias: bool,
    /// Full-attention layers' own geometry (Gemma 4's global layers); `None`: as the others.
    pub global_attention: Option<GlobalAttention>,
    /// Per-head RMSNorm without a weight on V after its projection (Gemma 4).
    pub v_norm: bool,
    /// The last this many layers compute no K and V: each reads the pages of the last earlier
    /// layer of its own kind (sliding or full) and keeps none itself (Gemma 4's
    /// `num_kv_shared_layers`).
    pub kv_shared_layers: usize,
    /// Those layers' dense MLP is twice `intermediate_size` wide (`use_double_wide_mlp`).
    pub wide_mlp_on_shared_layers: bool,
    /// Per-layer inputs (Gemma 4's PLE): see `plan::PerLayerInputSpec`.
    pub per_layer_input: Option<PerLayerInput>,
    /// Each layer's output (the residual stream) is multiplied by a learned scalar
    /// (Gemma 4's `layer_scalar`).
    pub layer_output_scale: bool,
    /// Logits become `cap · tanh(logits / cap)` (`final_logit_softcapping`).
    pub final_logit_softcap: Option<f32>,
    /// A sparse layer runs the dense MLP and, beside it, the experts with norms of their own
    /// and Gemma 4's router (`plan::LayerSpec::experts_beside`); else the experts replace it.
    pub experts_beside_mlp: bool,
}

/// How Gemma 4's global (full-attention) layers differ from its sliding ones.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GlobalAttention {
    pub head_dim: usize,
    pub num_kv_heads: usize,
    /// No V projection: the values are the K projection's output (`attention_k_eq_v`).
    pub values_are_keys: bool,
    /// Frequency pairs RoPE turns, of `head_dim / 2` ("proportional" RoPE: the frequencies
    /// are `theta^(-2i / head_dim)` whatever the count; the other pairs do not turn).
    pub rope_pairs: usize,
}

/// Gemma 4's per-layer inputs: a second embedding table of `width` values per layer, and a
/// projection of the token embedding to as many, combined and fed into every layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerLayerInput {
    pub width: usize,
    /// Rows of the per-layer embedding table (`vocab_size_per_layer_input`).
    pub vocab_size: usize,
}

impl BlockVariant {
    /// Llama's block: no Q/K norm, plain norms, SwiGLU, 1/sqrt(head_dim) scores.
    pub fn llama(head_dim: usize) -> Self {
        Self {
            qk_norm: false,
            norm_weight_offset: 0.0,
            post_norms: false,
            activation: Activation::Silu,
            embedding_scale: 1.0,
            attn_scale: 1.0 / (head_dim as f32).sqrt(),
            attn_output_gate: false,
            rotary_dim: None,
            attn_sinks: false,
            attn_output_bias: false,
            global_attention: None,
            v_norm: false,
            kv_shared_layers: 0,
            wide_mlp_on_shared_layers: false,
            per_layer_input: None,
            layer_output_scale: false,
            final_logit_softcap: None,
            experts_beside_mlp: false,
        }
    }
}

/// One layer's attention pattern.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerAttention {
    /// `Some(w)`: query i attends to keys j with i - w < j <= i (the last w tokens, itself
    /// included), as transformers' sliding-window mask; `None`: every earlier token.
    pub sliding_window: Option<usize>,
    /// The RoPE base of this layer (gemma3's sliding layers use `rope_local_base_freq`).
    pub rope_theta: f32,
    /// Whether `rope_scaling` applies to this layer (gemma3 scales global layers only).
    pub rope_scaled: bool,
}

/// A config no backend can run: its shapes contradict each other.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ShapeError(String);

impl ModelConfig {
    /// The checks every backend makes before its own (`supports`): heads that share KV heads
    /// evenly, an even head size for RoPE, windows that hold a token, a non-empty model.
    pub fn check_shape(&self) -> Result<(), ShapeError> {
        let fail = |message: String| Err(ShapeError(message));
        if self.num_heads == 0 || self.num_kv_heads == 0 || self.num_heads % self.num_kv_heads != 0
        {
            return fail(format!(
                "{} attention heads cannot share {} KV heads",
                self.num_heads, self.num_kv_heads
            ));
        }
        if self.head_dim == 0 || self.head_dim % 2 != 0 {
            return fail(format!("head_dim {} must be even for RoPE", self.head_dim));
        }
        let rotary = self.rotary_dim();
        if rotary == 0 || rotary % 2 != 0 || rotary > self.head_dim {
            return fail(format!(
                "RoPE over {rotary} of a head's {} dimensions: must be even, 2 or more and at most head_dim",
                self.head_dim
            ));
        }
        if let Some(l) = &self.linear_attention {
            let heads_share = l.num_key_heads > 0 && l.num_value_heads % l.num_key_heads == 0;
            if !heads_share || l.key_head_dim == 0 || l.value_head_dim == 0 || l.conv_kernel == 0 {
                return fail(format!(
                    "linear attention with {} key heads of {} and {} value heads of {}, a {}-tap \
                     convolution: value heads must share key heads evenly, nothing may be 0",
                    l.num_key_heads,
                    l.key_head_dim,
                    l.num_value_heads,
                    l.value_head_dim,
                    l.conv_kernel
                ));
            }
            if l.layers.len() != self.num_layers {
                return fail(format!(
                    "{} layer types for {} layers",
                    l.layers.len(),
                    self.num_layers
                ));
            }
        }
        if let Some(layer) =
            (0..self.num_layers).find(|&l| self.attention(l).sliding_window == Some(0))
        {
            return fail(format!("layer {layer} has a sliding window of 0 tokens"));
        }
        let dense = (0..self.num_layers).find(|&l| self.moe_at(l).is_none());
        if let (Some(layer), 0) = (dense, self.intermediate_size) {
            return fail(format!("layer {layer} has a dense MLP of width 0"));
        }
        if let Err(message) = self.check_layers() {
            return fail(message);
        }
        if self.vocab_size == 0 || self.hidden_size == 0 {
            return fail(format!(
                "empty model: vocab {} hidden {}",
                self.vocab_size, self.hidden_size
            ));
        }
        Ok(())
    }

    /// The mixture of experts of layer `layer`, `None` when its MLP is dense.
    pub fn moe_at(&self, layer: usize) -> Option<&MoeConfig> {
        self.moe.as_ref().filter(|m| m.is_sparse(layer))
    }

    /// The attention pattern of layer `layer`.
    pub fn attention(&self, layer: usize) -> LayerAttention {
        self.layer_attention
            .get(layer)
            .copied()
            .unwrap_or(LayerAttention {
                sliding_window: None,
                rope_theta: self.rope_theta,
                rope_scaled: true,
            })
    }

    /// Whether layer `layer` is a linear-attention layer of a hybrid.
    pub fn is_linear_attention(&self, layer: usize) -> bool {
        self.linear_attention
            .as_ref()
            .is_some_and(|l| l.is_linear(layer))
    }

    /// Dimensions of a head that RoPE turns (all but with a partial rotary factor).
    pub fn rotary_dim(&self) -> usize {
        self.block.rotary_dim.unwrap_or(self.head_dim)
    }

    /// RoPE inverse frequencies of layer `layer` (`rotary_dim / 2` of them), scaling included:
    /// the one definition both backends use.
    pub fn rope_inv_freq(&self, layer: usize) -> Vec<f32> {
        let attention = self.attention(layer);
        if let Some(global) = self.global_attention_at(layer) {
            return Self::proportional_inv_freq(global, attention.rope_theta);
        }
        let scaling = self.rope_scaling.filter(|_| attention.rope_scaled);
        rope_inv_freq(self.rotary_dim(), attention.rope_theta, scaling.as_ref())
    }

    /// What RoPE multiplies cos and sin by in layer `layer` (YaRN's attention factor; 1
    /// otherwise): scores grow by its square.
    pub fn rope_attention_factor(&self, layer: usize) -> f32 {
        let attention = self.attention(layer);
        self.rope_scaling
            .filter(|_| attention.rope_scaled)
            .map_or(1.0, |s| s.attention_factor())
    }
}
