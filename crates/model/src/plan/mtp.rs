//! A multi-token-prediction (MTP) layer: the extra decoder layer Qwen3.5 / Qwen3.6 (and
//! DeepSeek-V3's next-n) checkpoints ship for drafting the model's own next tokens.
//!
//! For the pair (token `p + 1`, the model's final hidden state `h_p` at position `p`, after
//! its final norm): `u = eh_proj · [enorm(embed(token)); hnorm(h_p)]`, then one decoder layer
//! over `u` at position `p` (attention with a KV cache of its own, addressed by the sequence's
//! pages like the other layers), `o = shared_head_norm(layer(u))`, and the model's LM head
//! over `o` scores token `p + 2`. A second draft step feeds `o` where `h` was.

use super::{LayerSpec, Mixer, TensorRole, TensorSpec};
use crate::config::ModelConfig;
use crate::tensor_names::LayerTensor;

#[derive(Debug, Clone, PartialEq)]
pub struct MtpSpec {
    /// The decoder layer: built as the model's last attention layer, at index `num_layers`
    /// (its tensors `blk.{num_layers}.*`).
    pub layer: LayerSpec,
}

impl MtpSpec {
    /// The MTP layer a checkpoint of `c` may carry (`None` for a model without an attention
    /// layer to take the shape of). Whether the weights hold it is the loader's question.
    pub fn of(c: &ModelConfig) -> Option<MtpSpec> {
        let last_attention = (0..c.num_layers)
            .rev()
            .find(|&l| !c.is_linear_attention(l))?;
        let mut layer = LayerSpec::of(c, last_attention);
        layer.index = c.num_layers;
        if let Mixer::Attention(a) = &mut layer.mixer {
            // Its own K/V, whatever the layer it takes the shape of reads.
            a.kv_source = None;
        }
        Some(MtpSpec { layer })
    }

    /// The KV-cache layer index of its attention.
    pub fn index(&self) -> usize {
        self.layer.index
    }

    /// Its tensors: the input projection and norms, the layer's, the output norm.
    pub fn tensors(&self) -> Vec<TensorSpec> {
        let mut out = self.outer_tensors();
        let head_norm = out.pop();
        out.extend(self.layer.tensors());
        out.extend(head_norm);
        out
    }

    /// Its tensors outside the decoder layer: the input projection `[hidden, 2 hidden]`, the
    /// two input norms, the output norm (last).
    pub fn outer_tensors(&self) -> Vec<TensorSpec> {
        let (hidden, l) = (self.layer.hidden_size, self.layer.index);
        let norm = |t: LayerTensor| TensorSpec::new(t.of(l), vec![hidden], TensorRole::Norm);
        vec![
            TensorSpec::new(
                LayerTensor::NextnEhProj.of(l),
                vec![hidden, 2 * hidden],
                TensorRole::Matrix,
            ),
            norm(LayerTensor::NextnEnorm),
            norm(LayerTensor::NextnHnorm),
            norm(LayerTensor::NextnSharedHeadNorm),
        ]
    }
}
