//! Drafts from a head that continues the target's own hidden states: Qwen3.5 / Qwen3.6's
//! multi-token-prediction layer (`--speculative mtp`) or an EAGLE-3 head trained for the
//! target (`--speculative eagle3`). The backend runs the head (`Backend::enable_draft_head`):
//! it keeps the head's K/V and the hidden states it continues from, caught up after every
//! step; this asks it for k draft steps, the first from the target's hidden state at the
//! sequence's last computed position, each next from the head's own output.

use super::proposer::{DraftRequest, Drafts, Proposer};
use crate::backend::{Backend, BackendError, HeadDraftStep};
use crate::sampler::Sampler;

#[derive(Debug)]
pub struct HeadProposer {
    /// Which head the backend runs, for logs and metrics.
    name: &'static str,
    sampler: Sampler,
}

impl HeadProposer {
    /// Drafts from the checkpoint's own multi-token-prediction layer.
    pub fn mtp() -> HeadProposer {
        HeadProposer {
            name: "mtp",
            sampler: Sampler::default(),
        }
    }

    /// Drafts from an EAGLE-3 head the backend was given with the target.
    pub fn eagle3() -> HeadProposer {
        HeadProposer {
            name: "eagle3",
            sampler: Sampler::default(),
        }
    }
}

impl Proposer for HeadProposer {
    fn name(&self) -> &'static str {
        self.name
    }

    fn prepare_target(&self, target: &mut dyn Backend) -> Result<(), BackendError> {
        target.enable_draft_head()
    }

    fn propose(
        &mut self,
        requests: &mut [DraftRequest<'_>],
        target: &mut dyn Backend,
    ) -> Result<Vec<Drafts>, BackendError> {
        let mut drafts: Vec<Drafts> = requests
            .iter()
            .map(|r| Drafts {
                draft_computed: r.draft_computed,
                ..Drafts::default()
            })
            .collect();
        let steps = requests.iter().map(|r| r.k).max().unwrap_or(0);
        for step in 0..steps {
            let active: Vec<usize> = (0..requests.len())
                .filter(|&i| requests[i].k > step && requests[i].tokens.len() >= 2)
                .collect();
            let mut batch = Vec::with_capacity(active.len());
            for &i in &active {
                let r = &requests[i];
                let slot = r.state_slot.ok_or_else(|| {
                    BackendError("drafting from a head needs the sequence's state slot".into())
                })?;
                // The pair (token L - 1, hidden state at L - 2) scores token L; each later
                // step feeds the draft before it.
                let len = r.tokens.len();
                let token = match step {
                    0 => r.tokens[len - 1],
                    _ => drafts[i].tokens[step - 1],
                };
                batch.push(HeadDraftStep {
                    state_slot: slot,
                    token,
                    position: len - 2 + step,
                    block_table: r.block_table,
                    from_target: step == 0,
                });
            }
            if batch.is_empty() {
                break;
            }
            let out = target.head_draft(&batch)?;
            for (row, &i) in active.iter().enumerate() {
                drafts[i].push_sampled(&mut self.sampler, out.row(row), &mut requests[i]);
            }
        }
        Ok(drafts)
    }
}
