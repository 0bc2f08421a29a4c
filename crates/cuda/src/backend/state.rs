//! The backend's recurrent state around a step: snapshots copied into and out of the
//! sequences' slots, and rewinding (crate::state_rewind): allocating it, the replays before a
//! step and the records during it.

use ferrite_engine::SeqBatch;

use super::CudaBackend;
use crate::buffer::copy_on_device;
use crate::state_rewind::{RewindPlan, StateRewind, StepRecording};
use crate::weights::Mixer;

impl CudaBackend {
    /// State offsets of the linear-attention layers, in layer order.
    fn linear_layers(&self) -> Vec<usize> {
        self.weights
            .layers
            .iter()
            .filter_map(|l| match &l.mixer {
                Mixer::LinearAttention(g) => Some(g.state_offset),
                Mixer::Attention(_) => None,
            })
            .collect()
    }

    fn linear_ld(&self) -> usize {
        self.ws.linear.as_ref().map_or(0, |b| b.ld)
    }

    pub(super) fn rewind_bytes_per_seat(&self, step_tokens: usize) -> usize {
        let layers = self.linear_layers().len();
        StateRewind::bytes_per_seat(
            self.weights.state_len,
            self.linear_ld(),
            layers,
            step_tokens,
        )
    }

    pub(super) fn alloc_rewind(&mut self, seats: usize, step_tokens: usize) -> anyhow::Result<()> {
        let Some((_, slots)) = &self.state else {
            anyhow::bail!("init_state_rewind before init_state_slots");
        };
        anyhow::ensure!(
            seats * step_tokens <= self.ws.cap.tokens,
            "rewinding {seats} sequences of {step_tokens} tokens needs a workspace of {} \
             tokens, it holds {} (raise max_num_batched_tokens, or lower max_num_seqs or the \
             speculative tokens)",
            seats * step_tokens,
            self.ws.cap.tokens
        );
        self.gpu.bind()?;
        let rewind = StateRewind::new(
            &self.gpu.stream,
            seats,
            step_tokens,
            self.weights.state_len,
            self.linear_ld(),
            self.linear_layers(),
            *slots,
        )?;
        tracing::info!(
            seats,
            step_tokens,
            mib = (seats * self.rewind_bytes_per_seat(step_tokens)) as f64 / (1u64 << 20) as f64,
            "CUDA recurrent-state rewinds allocated (speculative decoding)"
        );
        self.rewind = Some(rewind);
        Ok(())
    }

    /// Before a step: the sequences starting inside their last step get the rejected drafts
    /// taken out of their state, and the state before each rewindable step is kept.
    pub(super) fn rewind_states(&mut self, batch: &[SeqBatch<'_>]) -> anyhow::Result<RewindPlan> {
        let Some(rewind) = &mut self.rewind else {
            // Without recurrent state (a draft head's seats only) nothing needs rewinding.
            anyhow::ensure!(
                self.weights.state_len == 0 || batch.iter().all(|s| !s.state_copy.rewindable),
                "a rewindable step before init_state_rewind"
            );
            return Ok(RewindPlan::default());
        };
        let plan = rewind.plan(batch)?;
        let (Some(rewind), Some((state, _))) = (&self.rewind, &self.state) else {
            return Ok(plan);
        };
        let stream = &self.gpu.stream;
        if !plan.replays.is_empty() {
            let replays = rewind.restore(stream, state.ptr(), &plan.replays)?;
            self.model()
                .map_err(|e| anyhow::anyhow!(e.0))?
                .enqueue_replays(rewind, &replays)?;
        }
        rewind.save_before(stream, state.ptr(), &plan.records)?;
        Ok(plan)
    }

    /// What the step's linear-attention layers record (`None`: nothing).
    pub(super) fn recording<'a>(&'a self, plan: &'a RewindPlan) -> Option<StepRecording<'a>> {
        let rewind = self.rewind.as_ref()?;
        (!plan.records.is_empty()).then_some(StepRecording {
            rewind,
            records: &plan.records,
            stream: &self.gpu.stream,
        })
    }

    /// For each sequence whose `pick` names a snapshot slot: copies it into the sequence's slot
    /// (`true`) or the sequence's slot into it (`false`), whole slots, on the stream.
    pub(super) fn copy_states(
        &self,
        batch: &[SeqBatch<'_>],
        pick: impl Fn(&ferrite_engine::StateCopy) -> Option<(u32, bool)>,
    ) -> anyhow::Result<()> {
        let Some((state, _)) = &self.state else {
            return Ok(());
        };
        let bytes = self.weights.state_len * 4;
        for seq in batch {
            if let (Some(slot), Some((other, into_seq))) = (seq.state_slot, pick(&seq.state_copy)) {
                let (own, other) = (
                    state.at(slot as usize * bytes),
                    state.at(other as usize * bytes),
                );
                let (dst, src) = if into_seq { (own, other) } else { (other, own) };
                copy_on_device(&self.gpu.stream, dst, src, bytes)?;
            }
        }
        Ok(())
    }
}
