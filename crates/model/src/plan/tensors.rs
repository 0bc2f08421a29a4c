//! The tensors of one layer of the plan, under their canonical names and shapes, in file order.

use super::{LayerSpec, Mixer, MlpSpec, TensorRole, TensorSpec};
use crate::config::MoeConfig;
use crate::tensor_names::LayerTensor;

impl LayerSpec {
    /// Every tensor of the layer: the mixer's (norm first), the MLP's (and the experts beside
    /// it), the post norms, the per-layer input's, the output scale.
    pub fn tensors(&self) -> Vec<TensorSpec> {
        use LayerTensor as T;
        use TensorRole::{Bias, DecayRate, Matrix, Norm, Scale};
        let l = self.index;
        let hidden = self.hidden_size;
        let spec = |t: LayerTensor, shape: Vec<usize>, role| TensorSpec::new(t.of(l), shape, role);
        let mut out = vec![spec(T::AttnNorm, vec![hidden], Norm)];
        match &self.mixer {
            Mixer::Attention(a) => {
                let (q_dim, kv_dim, hd) = (a.q_dim(), a.kv_dim(), a.head_dim);
                // A layer reading another's K/V has no K/V projections (or K norm) of its own.
                let own_kv = a.kv_source.is_none();
                out.push(spec(T::AttnQ, vec![q_dim, a.input_width], Matrix));
                if own_kv {
                    out.push(spec(T::AttnK, vec![kv_dim, a.input_width], Matrix));
                }
                if own_kv && !a.values_are_keys {
                    out.push(spec(T::AttnV, vec![kv_dim, a.input_width], Matrix));
                }
                if a.qk_norm {
                    out.push(spec(T::AttnQNorm, vec![hd], Norm));
                    if own_kv {
                        out.push(spec(T::AttnKNorm, vec![hd], Norm));
                    }
                }
                if a.qkv_bias {
                    out.push(spec(T::AttnQBias, vec![q_dim], Bias));
                    out.push(spec(T::AttnKBias, vec![kv_dim], Bias));
                    out.push(spec(T::AttnVBias, vec![kv_dim], Bias));
                }
                if a.output_gate {
                    out.push(spec(T::AttnOutputGate, vec![q_dim, a.input_width], Matrix));
                }
                if a.sinks {
                    out.push(spec(T::AttnSinks, vec![a.num_heads], Bias));
                }
                out.push(spec(T::AttnOutput, vec![hidden, q_dim], Matrix));
                if a.output_bias {
                    out.push(spec(T::AttnOutputBias, vec![hidden], Bias));
                }
            }
            Mixer::LinearAttention(l) => {
                let (channels, value_dim, heads) =
                    (l.conv_channels(), l.value_dim(), l.num_value_heads);
                out.push(spec(T::AttnQkv, vec![channels, hidden], Matrix));
                out.push(spec(T::AttnGate, vec![value_dim, hidden], Matrix));
                out.push(spec(T::SsmBeta, vec![heads, hidden], Matrix));
                out.push(spec(T::SsmAlpha, vec![heads, hidden], Matrix));
                out.push(spec(T::SsmConv1d, vec![channels, l.conv_kernel], Matrix));
                out.push(spec(T::SsmDtBias, vec![heads], Bias));
                out.push(spec(T::SsmA, vec![heads], DecayRate));
                out.push(spec(T::SsmNorm, vec![l.value_head_dim], Scale));
                out.push(spec(T::SsmOut, vec![hidden, value_dim], Matrix));
            }
        }
        if self.post_norms {
            out.push(spec(T::PostAttentionNorm, vec![hidden], Norm));
        }
        out.push(spec(T::FfnNorm, vec![hidden], Norm));
        match &self.mlp {
            MlpSpec::Gated { width, .. } => {
                out.push(spec(T::FfnGate, vec![*width, hidden], Matrix));
                out.push(spec(T::FfnUp, vec![*width, hidden], Matrix));
                out.push(spec(T::FfnDown, vec![hidden, *width], Matrix));
            }
            MlpSpec::Experts { moe, .. } => out.extend(self.expert_tensors(moe)),
        }
        if let Some(moe) = &self.experts_beside {
            out.extend(self.expert_tensors(moe));
            out.push(spec(T::FfnGateInpScale, vec![hidden], Scale));
            out.push(spec(T::FfnDownExpsScale, vec![moe.num_experts], Scale));
            out.push(spec(T::FfnPreNorm2, vec![hidden], Norm));
            out.push(spec(T::FfnPostNorm1, vec![hidden], Norm));
            out.push(spec(T::FfnPostNorm2, vec![hidden], Norm));
        }
        if self.post_norms {
            out.push(spec(T::PostFfwNorm, vec![hidden], Norm));
        }
        if let Some(width) = self.per_layer_input {
            out.push(spec(T::PerLayerInpGate, vec![width, hidden], Matrix));
            out.push(spec(T::PerLayerProj, vec![hidden, width], Matrix));
            out.push(spec(T::PerLayerPostNorm, vec![hidden], Norm));
        }
        if self.output_scale {
            out.push(spec(T::LayerOutputScale, vec![1], Scale));
        }
        out
    }

    /// The router, the experts stacked as llama.cpp's GGUF files hold them, and qwen2_moe's
    /// shared expert with its one-row gate.
    fn expert_tensors(&self, moe: &MoeConfig) -> Vec<TensorSpec> {
        use LayerTensor as T;
        use TensorRole::{Bias, Matrix};
        let hidden = self.hidden_size;
        let spec = |t: LayerTensor, shape: Vec<usize>, role| {
            TensorSpec::new(t.of(self.index), shape, role)
        };
        let (experts, width) = (moe.num_experts, moe.expert_intermediate_size);
        let mut out = vec![
            spec(T::FfnGateInp, vec![experts, hidden], Matrix),
            spec(T::FfnGateExps, vec![experts, width, hidden], Matrix),
            spec(T::FfnUpExps, vec![experts, width, hidden], Matrix),
            spec(T::FfnDownExps, vec![experts, hidden, width], Matrix),
        ];
        if moe.biases {
            out.push(spec(T::FfnGateInpBias, vec![experts], Bias));
            out.push(spec(T::FfnGateExpsBias, vec![experts, width], Bias));
            out.push(spec(T::FfnUpExpsBias, vec![experts, width], Bias));
            out.push(spec(T::FfnDownExpsBias, vec![experts, hidden], Bias));
        }
        if let Some(shared) = moe.shared_expert_intermediate_size {
            out.push(spec(T::FfnGateShexp, vec![shared, hidden], Matrix));
            out.push(spec(T::FfnUpShexp, vec![shared, hidden], Matrix));
            out.push(spec(T::FfnDownShexp, vec![hidden, shared], Matrix));
            out.push(spec(T::FfnGateInpShexp, vec![1, hidden], Matrix));
        }
        out
    }
}
