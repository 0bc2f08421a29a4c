//! Drafts from a smaller model with the target's tokenizer.
//!
//! The draft model keeps its own paged KV cache under the target's page ids, so the
//! scheduler's block tables address both. It computes every prefill chunk the target computes
//! (`observe`), then, when asked for k drafts, runs k batched single-token steps over all
//! speculating sequences (the first step also catches up on the tokens accepted last round).

use super::proposer::{DraftRequest, Drafts, Proposer};
use crate::backend::{Backend, BackendError, LogitsRequest, SeqBatch};
use crate::sampler::Sampler;

pub struct DraftModel {
    backend: Box<dyn Backend>,
    sampler: Sampler,
    /// Mean seconds of the last `propose`'s steady steps (see `Proposer::step_seconds`).
    steady_step: Option<f64>,
}

impl DraftModel {
    /// Refuses a draft model with recurrent state: its drafts would need slots and rewinds
    /// of their own, which the proposer does not keep.
    pub fn new(backend: Box<dyn Backend>) -> Result<Self, BackendError> {
        if backend.state_bytes_per_sequence() > 0 {
            return Err(BackendError(
                "a draft model with linear-attention layers is not supported; use an \
                 attention-only draft model, or the n-gram or suffix proposer"
                    .into(),
            ));
        }
        Ok(Self {
            backend,
            // Without the EOS ids its `min_tokens` holds back only stop ids: q is a guess, and
            // the target's verification holds back the rest.
            sampler: Sampler::default(),
            steady_step: None,
        })
    }

    pub fn vocab_size(&self) -> usize {
        self.backend.vocab_size()
    }
}

impl Proposer for DraftModel {
    fn name(&self) -> &'static str {
        "draft"
    }

    fn kv_bytes_per_token(&self) -> usize {
        self.backend.kv_bytes_per_token()
    }

    fn init_kv_cache(&mut self, num_pages: usize, page_size: usize) -> Result<(), BackendError> {
        self.backend.init_kv_cache(num_pages, page_size)
    }

    fn observe(&mut self, batch: &[SeqBatch<'_>]) -> Result<(), BackendError> {
        if batch.is_empty() {
            return Ok(());
        }
        let silent: Vec<SeqBatch<'_>> = batch
            .iter()
            .map(|s| SeqBatch {
                logits: LogitsRequest::None,
                // The target's window pages and recurrent state are not the draft's: it
                // keeps every layer in the shared pool's pages, and has no state.
                window_table: &[],
                state_slot: None,
                state_copy: Default::default(),
                ..*s
            })
            .collect();
        self.backend.forward(&silent).map(|_| ())
    }

    fn propose(
        &mut self,
        requests: &mut [DraftRequest<'_>],
        _target: &mut dyn Backend,
    ) -> Result<Vec<Drafts>, BackendError> {
        let mut drafts: Vec<Drafts> = requests
            .iter()
            .map(|r| Drafts {
                draft_computed: r.draft_computed,
                ..Drafts::default()
            })
            .collect();
        let steps = requests.iter().map(|r| r.k).max().unwrap_or(0);
        let (mut steady_seconds, mut steady_steps) = (0.0, 0usize);
        for step in 0..steps {
            let started = std::time::Instant::now();
            // Step 0 feeds what the draft has not seen (at least the sequence's last token);
            // later steps feed the previous draft.
            let active: Vec<usize> = (0..requests.len())
                .filter(|&i| requests[i].k > step)
                .collect();
            let batch: Vec<SeqBatch<'_>> = active
                .iter()
                .map(|&i| {
                    let r = &requests[i];
                    let d = &drafts[i];
                    let (tokens, start_pos) = if step == 0 {
                        (&r.tokens[r.draft_computed..], r.draft_computed)
                    } else {
                        (&d.tokens[step - 1..step], r.tokens.len() + step - 1)
                    };
                    SeqBatch {
                        tokens,
                        start_pos,
                        block_table: r.block_table,
                        // The draft model keeps every layer in the shared pool's pages.
                        window_table: &[],
                        state_slot: None,
                        state_copy: Default::default(),
                        logits: LogitsRequest::Last,
                    }
                })
                .collect();
            let widest = batch.iter().map(|s| s.tokens.len()).max().unwrap_or(0);
            let out = self.backend.forward(&batch)?;
            drop(batch);
            for (row, &i) in active.iter().enumerate() {
                let d = &mut drafts[i];
                d.push_sampled(&mut self.sampler, out.row(row), &mut requests[i]);
                d.draft_computed = requests[i].tokens.len() + step;
            }
            if widest <= 2 {
                steady_seconds += started.elapsed().as_secs_f64();
                steady_steps += 1;
            }
        }
        self.steady_step = (steady_steps > 0).then(|| steady_seconds / steady_steps as f64);
        Ok(drafts)
    }

    fn step_seconds(&self, _propose_seconds: f64, _k: usize) -> Option<f64> {
        self.steady_step
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::backend::Backend;
    use crate::request::SamplingParams;
    use crate::testing::fake_backend::FakeBackend;

    fn propose(draft: &mut DraftModel, tokens: &[u32], draft_computed: usize, k: usize) {
        let params = SamplingParams::default();
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let block_table: Vec<u32> = (0..8).collect();
        let mut requests = [DraftRequest {
            id: 1,
            tokens,
            num_prompt_tokens: tokens.len(),
            draft_computed,
            block_table: &block_table,
            state_slot: None,
            params: &params,
            k,
            rng: &mut rng,
        }];
        let drafts = draft
            .propose(&mut requests, &mut FakeBackend::new(4096))
            .unwrap();
        assert_eq!(drafts[0].tokens.len(), k);
    }

    #[test]
    fn the_step_cost_comes_from_steady_steps_only() {
        let mut backend = FakeBackend::new(4096);
        backend.init_kv_cache(8, 16).unwrap();
        let mut draft = DraftModel::new(Box::new(backend)).unwrap();
        let tokens: Vec<u32> = (0..40).map(|i| i % 7).collect();
        // One draft whose only step catches up on 40 unseen tokens: nothing steady to learn.
        propose(&mut draft, &tokens, 0, 1);
        assert_eq!(draft.step_seconds(1.0, 1), None);
        // Caught up to the last token: every step feeds one token.
        propose(&mut draft, &tokens, 39, 3);
        assert!(draft.step_seconds(1.0, 1).is_some());
        // Catch-up first, then two steady steps: only those count (still Some).
        propose(&mut draft, &tokens, 10, 3);
        assert!(draft.step_seconds(1.0, 1).is_some());
    }
}
