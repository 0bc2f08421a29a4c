//! The shape of a decoder-only transformer, whichever file it came from.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// Llama and its relatives (SmolLM2): no QKV bias.
    Llama,
    /// Qwen2 / Qwen2.5: bias on Q, K and V.
    Qwen2,
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
}
