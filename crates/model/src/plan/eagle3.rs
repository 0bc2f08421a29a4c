//! An EAGLE-3 draft head: one decoder layer trained to continue a target model from three of
//! its hidden states, with a vocabulary of its own (a subset of the target's).
//!
//! For the pair (token `p + 1`, the target at position `p`): the first draft step's hidden
//! state is `g = fc · [a_1(p); a_2(p); a_3(p)]`, the target's residual stream at the input of
//! its layers `aux_layers` (3 · target hidden wide); a later step's `g` is the head's own
//! output of the step before. With `e = embed(token)` (the target's embedding unless the
//! head has its own): the layer's Q, K and V read `x = [input_norm(e); hidden_norm(g)]`
//! (embedding first, 2 · hidden wide) and its residual is `r = g` (`hidden_norm(g)` under
//! `residual_normed`): `h = r + attention(x)` at position `p` over the head's own K/V,
//! `h2 = h + mlp(post_attention_norm(h))`. The draft logits are `lm_head(norm(h2))` over the
//! draft vocabulary, draft id `i` being target id `i + d2t[i]`; the next step continues from
//! `h2` (`norm(h2)` under `feed_normed`). vLLM's and SGLang's reading of these checkpoints.

use super::{LayerSpec, Mixer, MlpSpec, NormSpec, TensorRole, TensorSpec};
use crate::config::ModelConfig;

/// `fc`, `[hidden, 3 · target hidden]`.
pub const FC: &str = "eagle3.fc.weight";
/// The norm of `g` before the layer, `[hidden]`.
pub const HIDDEN_NORM: &str = "eagle3.hidden_norm.weight";
/// The final norm, `[hidden]`.
pub const OUTPUT_NORM: &str = "eagle3.output_norm.weight";
/// The LM head over the draft vocabulary, `[draft vocab, hidden]` (absent: the target's).
pub const OUTPUT: &str = "eagle3.output.weight";
/// The head's own token embedding, `[vocab, hidden]` (absent: the target's).
pub const TOKEN_EMBD: &str = "eagle3.token_embd.weight";

/// What a head's config says beyond its decoder layer's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Eagle3Options {
    /// The target layers whose input (the residual stream after the layer before) feeds
    /// `fc`, in concatenation order.
    pub aux_layers: [usize; 3],
    /// Rows of the head's LM head.
    pub draft_vocab: usize,
    /// Width of each target hidden state `fc` reads.
    pub target_hidden: usize,
    /// The residual is `hidden_norm(g)`, not `g` (speculators' `norm_before_residual`).
    pub residual_normed: bool,
    /// The next step continues from `norm(h2)`, not `h2` (speculators' `norm_output`).
    pub feed_normed: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Eagle3Spec {
    /// The decoder layer, at KV index `target.num_layers` (its tensors `blk.{that}.*`); its
    /// attention reads rows of `2 · hidden`.
    pub layer: LayerSpec,
    /// The head's norms (its own epsilon).
    pub norm: NormSpec,
    pub options: Eagle3Options,
    /// The target's vocabulary (the head's embedding rows, and the ids `d2t` maps into).
    pub vocab_size: usize,
}

impl Eagle3Spec {
    /// The head whose one decoder layer `head` describes (its own config: shape, norms, RoPE)
    /// for `target`; an error says why the pair does not fit.
    pub fn new(
        head: &ModelConfig,
        target: &ModelConfig,
        options: Eagle3Options,
    ) -> Result<Eagle3Spec, String> {
        if head.num_layers != 1 {
            return Err(format!(
                "EAGLE-3 heads of {} layers are not supported (one decoder layer)",
                head.num_layers
            ));
        }
        if head.vocab_size != target.vocab_size {
            return Err(format!(
                "the head's vocabulary ({}) is not the target's ({})",
                head.vocab_size, target.vocab_size
            ));
        }
        if let Some(&l) = options.aux_layers.iter().find(|&&l| l >= target.num_layers) {
            return Err(format!(
                "auxiliary hidden state at layer {l}: the target has {} layers",
                target.num_layers
            ));
        }
        if options.target_hidden != target.hidden_size {
            return Err(format!(
                "the head reads target hidden states of {}, the target's are {}",
                options.target_hidden, target.hidden_size
            ));
        }
        if options.draft_vocab == 0 || options.draft_vocab > target.vocab_size {
            return Err(format!(
                "draft vocabulary of {} for a target vocabulary of {}",
                options.draft_vocab, target.vocab_size
            ));
        }
        let mut layer = LayerSpec::of(head, 0);
        layer.index = target.num_layers;
        let Mixer::Attention(attention) = &mut layer.mixer else {
            return Err("the head's layer is not an attention layer".into());
        };
        attention.input_width = 2 * head.hidden_size;
        attention.kv_source = None;
        if !matches!(layer.mlp, MlpSpec::Gated { .. })
            || layer.post_norms
            || layer.experts_beside.is_some()
            || layer.per_layer_input.is_some()
            || layer.output_scale
        {
            return Err("the head's layer is not a plain decoder layer (norm, MLP)".into());
        }
        Ok(Eagle3Spec {
            layer,
            norm: NormSpec {
                eps: head.rms_norm_eps,
                weight_offset: head.block.norm_weight_offset,
            },
            options,
            vocab_size: target.vocab_size,
        })
    }

    /// The KV-cache layer index of its attention.
    pub fn index(&self) -> usize {
        self.layer.index
    }

    pub fn hidden_size(&self) -> usize {
        self.layer.hidden_size
    }

    /// Its tensors: `fc`, the hidden norm, the layer's, the final norm, then the LM head and
    /// the embedding where the head has its own.
    pub fn tensors(&self, own_head: bool, own_embedding: bool) -> Vec<TensorSpec> {
        let hidden = self.hidden_size();
        let norm = |name: &str| TensorSpec::new(name.into(), vec![hidden], TensorRole::Norm);
        let matrix = |name: &str, shape| TensorSpec::new(name.into(), shape, TensorRole::Matrix);
        let mut out = vec![
            matrix(FC, vec![hidden, 3 * self.options.target_hidden]),
            norm(HIDDEN_NORM),
        ];
        out.extend(self.layer.tensors());
        out.push(norm(OUTPUT_NORM));
        if own_head {
            out.push(matrix(OUTPUT, vec![self.options.draft_vocab, hidden]));
        }
        if own_embedding {
            out.push(matrix(TOKEN_EMBD, vec![self.vocab_size, hidden]));
        }
        out
    }
}

/// The target layers a head reads when its config names none: vLLM's, SGLang's and
/// speculators' default, the inputs of layers 2, L/2 and L - 3 of an L-layer target.
pub fn default_aux_layers(target_layers: usize) -> [usize; 3] {
    [
        2.min(target_layers.saturating_sub(1)),
        target_layers / 2,
        target_layers.saturating_sub(3),
    ]
}
