//! The canonical names of a model's tensors (llama.cpp's GGUF names, which Hugging Face
//! checkpoints are renamed to at load): one vocabulary for both backends, the dummy weights and
//! the readers, so that a name is written once and a typo is a compile error.

/// The token embedding, `[vocab, hidden]`.
pub const TOKEN_EMBD: &str = "token_embd.weight";
/// The LM head, `[vocab, hidden]`; absent when tied to the embedding.
pub const OUTPUT: &str = "output.weight";
/// The final norm, `[hidden]`.
pub const OUTPUT_NORM: &str = "output_norm.weight";
/// Gemma 4's per-layer inputs: the embedding table `[vocab, layers * width]`, the projection
/// of the token embedding `[layers * width, hidden]` and the norm of its slices `[width]`.
pub const PER_LAYER_TOKEN_EMBD: &str = "per_layer_token_embd.weight";
pub const PER_LAYER_MODEL_PROJ: &str = "per_layer_model_proj.weight";
pub const PER_LAYER_PROJ_NORM: &str = "per_layer_proj_norm.weight";

/// A tensor of one decoder layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerTensor {
    /// The pre-attention RMSNorm.
    AttnNorm,
    AttnQ,
    AttnK,
    AttnV,
    AttnQBias,
    AttnKBias,
    AttnVBias,
    /// Per-head RMSNorm of Q and K (qwen3, gemma3).
    AttnQNorm,
    AttnKNorm,
    /// The attention's output projection.
    AttnOutput,
    /// RMSNorm of the attention output before its residual add (gemma3).
    PostAttentionNorm,
    /// The pre-MLP RMSNorm.
    FfnNorm,
    /// RMSNorm of the MLP output before its residual add (gemma3).
    PostFfwNorm,
    FfnGate,
    FfnUp,
    FfnDown,
    /// A mixture of experts' router, `[experts, hidden]`.
    FfnGateInp,
    /// Every expert's projection stacked, `[experts, rows, cols]`.
    FfnGateExps,
    FfnUpExps,
    FfnDownExps,
    /// qwen2_moe's shared expert and its gate `[1, hidden]`.
    FfnGateShexp,
    FfnUpShexp,
    FfnDownShexp,
    FfnGateInpShexp,
    /// Gated attention's output gate (qwen3_5, qwen3_next), `[q_dim, hidden]`: the attention
    /// output is multiplied by `sigmoid(gate · x)` (checkpoints interleave it per head with
    /// the query rows; the family splits it out at load).
    AttnOutputGate,
    /// A linear-attention layer's (Gated DeltaNet's) projection of q, k and v, stacked.
    AttnQkv,
    /// Its output gate `z`, one per value element.
    AttnGate,
    /// Its per-value-head `beta` and decay-step (`alpha`) projections, `[value_heads, hidden]`.
    SsmBeta,
    SsmAlpha,
    /// Its depthwise convolution over q, k, v: `[channels, taps]`.
    SsmConv1d,
    /// Its per-value-head decay-step bias (`dt_bias`).
    SsmDtBias,
    /// Its per-value-head decay rate `A = -exp(A_log)`.
    SsmA,
    /// The RMSNorm of its output, per value head, before the gate (weights used as they are).
    SsmNorm,
    /// Its output projection.
    SsmOut,
    /// gpt-oss: the per-query-head attention sink logits, `[heads]`.
    AttnSinks,
    /// gpt-oss: the output projection's bias, `[hidden]`.
    AttnOutputBias,
    /// gpt-oss: the router's bias `[experts]`, and each expert projection's, stacked
    /// (`[experts, rows]`).
    FfnGateInpBias,
    FfnGateExpsBias,
    FfnUpExpsBias,
    FfnDownExpsBias,
    /// Gemma 4's per-layer input gate `[width, hidden]`, its projection back `[hidden, width]`
    /// and the norm of that projection.
    PerLayerInpGate,
    PerLayerProj,
    PerLayerPostNorm,
    /// Gemma 4's `layer_scalar`, `[1]`.
    LayerOutputScale,
    /// Gemma 4's router: the scale of its normed input `[hidden]`, and a scale per expert
    /// `[experts]` of the chosen weights.
    FfnGateInpScale,
    FfnDownExpsScale,
    /// Gemma 4's experts beside the MLP: the norm of their input, and the norms of the MLP's
    /// and the experts' outputs before they are summed.
    FfnPreNorm2,
    FfnPostNorm1,
    FfnPostNorm2,
    /// A multi-token-prediction layer (`plan::MtpSpec`, appended after the decoder's layers
    /// as llama.cpp's `nextn` blocks): the projection of the normed embedding and hidden state
    /// `[hidden, 2 hidden]`, their norms, and the norm of its output.
    NextnEhProj,
    NextnEnorm,
    NextnHnorm,
    NextnSharedHeadNorm,
}

impl LayerTensor {
    /// The name after `blk.{layer}.`.
    pub fn suffix(self) -> &'static str {
        match self {
            LayerTensor::AttnNorm => "attn_norm.weight",
            LayerTensor::AttnQ => "attn_q.weight",
            LayerTensor::AttnK => "attn_k.weight",
            LayerTensor::AttnV => "attn_v.weight",
            LayerTensor::AttnQBias => "attn_q.bias",
            LayerTensor::AttnKBias => "attn_k.bias",
            LayerTensor::AttnVBias => "attn_v.bias",
            LayerTensor::AttnQNorm => "attn_q_norm.weight",
            LayerTensor::AttnKNorm => "attn_k_norm.weight",
            LayerTensor::AttnOutput => "attn_output.weight",
            LayerTensor::PostAttentionNorm => "post_attention_norm.weight",
            LayerTensor::FfnNorm => "ffn_norm.weight",
            LayerTensor::PostFfwNorm => "post_ffw_norm.weight",
            LayerTensor::FfnGate => "ffn_gate.weight",
            LayerTensor::FfnUp => "ffn_up.weight",
            LayerTensor::FfnDown => "ffn_down.weight",
            LayerTensor::FfnGateInp => "ffn_gate_inp.weight",
            LayerTensor::FfnGateExps => "ffn_gate_exps.weight",
            LayerTensor::FfnUpExps => "ffn_up_exps.weight",
            LayerTensor::FfnDownExps => "ffn_down_exps.weight",
            LayerTensor::FfnGateShexp => "ffn_gate_shexp.weight",
            LayerTensor::FfnUpShexp => "ffn_up_shexp.weight",
            LayerTensor::FfnDownShexp => "ffn_down_shexp.weight",
            LayerTensor::FfnGateInpShexp => "ffn_gate_inp_shexp.weight",
            LayerTensor::AttnOutputGate => "attn_output_gate.weight",
            LayerTensor::AttnQkv => "attn_qkv.weight",
            LayerTensor::AttnGate => "attn_gate.weight",
            LayerTensor::SsmBeta => "ssm_beta.weight",
            LayerTensor::SsmAlpha => "ssm_alpha.weight",
            LayerTensor::SsmConv1d => "ssm_conv1d.weight",
            LayerTensor::SsmDtBias => "ssm_dt.bias",
            LayerTensor::SsmA => "ssm_a",
            LayerTensor::SsmNorm => "ssm_norm.weight",
            LayerTensor::SsmOut => "ssm_out.weight",
            LayerTensor::AttnSinks => "attn_sinks.weight",
            LayerTensor::AttnOutputBias => "attn_output.bias",
            LayerTensor::FfnGateInpBias => "ffn_gate_inp.bias",
            LayerTensor::FfnGateExpsBias => "ffn_gate_exps.bias",
            LayerTensor::FfnUpExpsBias => "ffn_up_exps.bias",
            LayerTensor::FfnDownExpsBias => "ffn_down_exps.bias",
            LayerTensor::PerLayerInpGate => "inp_gate.weight",
            LayerTensor::PerLayerProj => "proj.weight",
            LayerTensor::PerLayerPostNorm => "post_norm.weight",
            LayerTensor::LayerOutputScale => "layer_output_scale.weight",
            LayerTensor::FfnGateInpScale => "ffn_gate_inp.scale",
            LayerTensor::FfnDownExpsScale => "ffn_down_exps.scale",
            LayerTensor::FfnPreNorm2 => "pre_ffw_norm_2.weight",
            LayerTensor::FfnPostNorm1 => "post_ffw_norm_1.weight",
            LayerTensor::FfnPostNorm2 => "post_ffw_norm_2.weight",
            LayerTensor::NextnEhProj => "nextn.eh_proj.weight",
            LayerTensor::NextnEnorm => "nextn.enorm.weight",
            LayerTensor::NextnHnorm => "nextn.hnorm.weight",
            LayerTensor::NextnSharedHeadNorm => "nextn.shared_head_norm.weight",
        }
    }

    /// Its name in layer `layer`: `blk.{layer}.{suffix}`.
    pub fn of(self, layer: usize) -> String {
        format!("blk.{layer}.{}", self.suffix())
    }
}

/// One projection of a mixture of experts' SwiGLU experts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpertProj {
    Gate,
    Up,
    Down,
}

impl ExpertProj {
    pub const ALL: [ExpertProj; 3] = [ExpertProj::Gate, ExpertProj::Up, ExpertProj::Down];

    /// `ffn_gate`, `ffn_up`, `ffn_down`: the stem of both names below, and of messages.
    pub fn stem(self) -> &'static str {
        match self {
            ExpertProj::Gate => "ffn_gate",
            ExpertProj::Up => "ffn_up",
            ExpertProj::Down => "ffn_down",
        }
    }

    /// The stacked tensor of every expert (GGUF, the dummy weights).
    pub fn stacked(self) -> LayerTensor {
        match self {
            ExpertProj::Gate => LayerTensor::FfnGateExps,
            ExpertProj::Up => LayerTensor::FfnUpExps,
            ExpertProj::Down => LayerTensor::FfnDownExps,
        }
    }

    /// One expert's matrix as older Mixtral GGUF files and renamed Hugging Face checkpoints
    /// hold it: `blk.{layer}.{stem}.{expert}.weight`.
    pub fn of_expert(self, layer: usize, expert: usize) -> String {
        format!("blk.{layer}.{}.{expert}.weight", self.stem())
    }
}

impl std::fmt::Display for ExpertProj {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.stem())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_llama_cpps() {
        assert_eq!(LayerTensor::AttnQ.of(3), "blk.3.attn_q.weight");
        assert_eq!(LayerTensor::AttnVBias.of(0), "blk.0.attn_v.bias");
        assert_eq!(
            ExpertProj::Down.stacked().of(1),
            "blk.1.ffn_down_exps.weight"
        );
        assert_eq!(ExpertProj::Gate.of_expert(2, 7), "blk.2.ffn_gate.7.weight");
    }
}
