//! A random EAGLE-3 head of a target's real shape (`--load-format dummy` speed runs of
//! `--speculative eagle3`): one decoder layer as wide as the target's, reading the default
//! auxiliary layers, with its own LM head over the first `DRAFT_VOCAB` token ids (the size
//! the published Llama 3 heads use). Random weights are accepted next to never, so this
//! measures what drafting costs, not what it gains.

use super::{host_tensors, spec_inits};
use crate::config::ModelConfig;
use crate::load::Eagle3Head;
use crate::plan::{default_aux_layers, Eagle3Options, Eagle3Spec, ModelPlan};

/// Rows of the random head's LM head (at most the target's vocabulary).
pub const DRAFT_VOCAB: usize = 32_000;

/// The random head for `target`, drawn from `seed` (tensor names keep the streams apart from
/// the target's).
pub fn dummy_eagle3(target: &ModelConfig, seed: u64) -> anyhow::Result<Eagle3Head> {
    let mut head = target.clone();
    head.num_layers = 1;
    let draft_vocab = DRAFT_VOCAB.min(target.vocab_size);
    let options = Eagle3Options {
        aux_layers: default_aux_layers(target.num_layers),
        draft_vocab,
        target_hidden: target.hidden_size,
        residual_normed: false,
        feed_normed: false,
    };
    let spec = Eagle3Spec::new(&head, target, options).map_err(anyhow::Error::msg)?;
    let plan = ModelPlan::of(target);
    let weights = host_tensors(spec_inits(&plan, spec.tensors(true, false), seed));
    Ok(Eagle3Head {
        spec,
        weights,
        draft_to_target: (0..draft_vocab as u32).collect(),
        own_head: true,
        own_embedding: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_random_head_has_every_tensor_of_its_spec_at_its_shape() {
        let target = crate::dummy::preset("tiny").expect("preset");
        let head = dummy_eagle3(&target, 7).unwrap();
        for t in head.spec.tensors(true, false) {
            let got = head.weights.get(&t.name).unwrap();
            assert_eq!(got.shape, t.shape, "{}", t.name);
        }
        assert_eq!(head.draft_to_target.len(), head.spec.options.draft_vocab);
    }
}
