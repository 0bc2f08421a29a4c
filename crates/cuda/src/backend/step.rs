//! One step on the GPU: the batch checked and laid out, snapshots restored and rejected drafts
//! taken back out, the layers launched (a captured decode graph, or kernel by kernel), the
//! LM-head rows sampled or downloaded in chunks, the draft head caught up, snapshots saved.

use ferrite_engine::{
    validate_batch, BackendError, BatchLimits, DeviceSampling, ForwardOutput, SampledOutput,
    SeqBatch,
};

use super::CudaBackend;
use crate::buffer::upload;
use crate::forward::StepShape;
use crate::graphs::{ladder, DecodeGraphs};
use crate::launchers::decode_splits;
use crate::step_inputs::StepInputs;

impl CudaBackend {
    pub(super) fn capture_graphs(&mut self) -> anyhow::Result<()> {
        let sizes = ladder(self.options.max_num_seqs, self.options.cuda_graph_max_bs);
        let mut inputs = StepInputs::default();
        let page_size = self.kv.as_ref().map_or(16, |kv| kv.page_size);
        let windowed = self.kv.as_ref().is_some_and(|kv| kv.window_pages > 0);
        let gpu = &self.gpu;
        let model = self.model().map_err(|e| anyhow::anyhow!(e.0))?;
        let slots = self.decode_slots;
        let kv_heads = self.config.num_kv_heads;
        let invariant = self.options.batch_invariant;
        let folds = self.folds_residual();
        let (graphs, report) = DecodeGraphs::capture(
            &gpu.stream,
            &sizes,
            || gpu.memory().map(|(free, _)| free).unwrap_or(0),
            |bs, capturing| {
                inputs.build(&[], &[], page_size, Some(bs), windowed);
                if !capturing {
                    upload(&gpu.stream, model.meta, &inputs.packed)?;
                }
                let shape =
                    StepShape::of(&inputs, decode_splits(bs, kv_heads, slots, None, invariant));
                let mut delta_pending = model.enqueue_layers(&shape)?;
                if folds {
                    // The MTP catch-up after the graph reads every row's final residual.
                    model.fold_residual(bs, delta_pending)?;
                    delta_pending = false;
                }
                model.enqueue_logits(inputs.offsets.logit_rows, bs, delta_pending)
            },
        )?;
        tracing::info!(
            graphs = report.graphs,
            max_bs = sizes.last().copied().unwrap_or(0),
            seconds = report.seconds,
            mib = report.bytes as f64 / (1u64 << 20) as f64,
            "captured decode CUDA graphs"
        );
        self.graphs = graphs;
        Ok(())
    }

    pub(super) fn run(
        &mut self,
        batch: &[SeqBatch<'_>],
        sampling: &[Option<DeviceSampling>],
    ) -> Result<SampledOutput, BackendError> {
        let err = |e: anyhow::Error| BackendError(format!("cuda: {e:#}"));
        self.gpu.bind().map_err(err)?;
        let (Some(kv), Some((meta, meta_cap))) = (&self.kv, &self.meta) else {
            return Err(BackendError("forward called before init_kv_cache".into()));
        };
        let (page_size, window_pages, meta, meta_cap) =
            (kv.page_size, kv.window_pages, meta.ptr(), *meta_cap);
        let limits = BatchLimits {
            vocab_size: self.config.vocab_size,
            num_pages: kv.num_pages,
            page_size,
            state_slots: self.state.as_ref().map_or(0, |(_, slots)| *slots),
            window_pages,
        };
        validate_batch(batch, limits)?;
        // Snapshots restored into their sequences' slots before the step (stream order), then
        // rejected drafts taken back out and the state before a rewindable step kept.
        self.copy_states(batch, |c| c.restore_from.map(|from| (from, true)))
            .map_err(err)?;
        let rewinds = self.rewind_states(batch).map_err(err)?;
        let all_decode = batch.iter().all(|s| s.tokens.len() == 1);
        let graph_bs = if all_decode {
            self.graphs.size_for(batch.len())
        } else {
            None
        };
        self.inputs
            .build(batch, sampling, page_size, graph_bs, window_pages > 0);
        let cap = self.ws.cap;
        let inputs = &self.inputs;
        if inputs.num_tokens > cap.tokens
            || batch.len() > cap.seqs
            || inputs.packed.len() > meta_cap
        {
            return Err(BackendError(format!(
                "step of {} tokens / {} sequences / {} metadata entries exceeds the CUDA \
                 workspace ({} / {} / {})",
                inputs.num_tokens,
                batch.len(),
                inputs.packed.len(),
                cap.tokens,
                cap.seqs,
                meta_cap
            )));
        }
        upload(&self.gpu.stream, meta, &inputs.packed).map_err(err)?;
        let mut out = SampledOutput {
            forward: ForwardOutput {
                logits: Vec::with_capacity(inputs.host_rows.len() * self.config.vocab_size),
                vocab_size: self.config.vocab_size,
            },
            tokens: vec![None; batch.len()],
        };
        let chunk = cap.logit_rows;
        match graph_bs {
            Some(bs) => {
                self.graphs.launch(bs).map_err(err)?;
                self.collect(0, bs, &mut out).map_err(err)?;
            }
            None => {
                let splits = decode_splits(
                    inputs.num_decodes,
                    self.config.num_kv_heads,
                    self.decode_slots,
                    Some(inputs.max_decode_ctx),
                    self.options.batch_invariant,
                );
                let shape = StepShape::of(inputs, splits);
                let (rows_at, total) = (inputs.offsets.logit_rows, inputs.num_logit_rows);
                let recording = self.recording(&rewinds);
                let mut model = self.model()?;
                model.recording = recording.as_ref().map(|r| r as _);
                let mut delta_pending = model.enqueue_layers(&shape).map_err(err)?;
                if self.folds_residual() {
                    model
                        .fold_residual(inputs.num_tokens, delta_pending)
                        .map_err(err)?;
                    delta_pending = false;
                }
                let mut c0 = 0;
                while c0 < total {
                    let c1 = (c0 + chunk).min(total);
                    self.model()?
                        .enqueue_logits(rows_at + c0, c1 - c0, delta_pending)
                        .map_err(err)?;
                    self.collect(c0, c1, &mut out).map_err(err)?;
                    c0 = c1;
                }
            }
        }
        self.head_catch_up(batch).map_err(err)?;
        // Snapshots saved after the step (the layers are done once the logits came back).
        self.copy_states(batch, |c| c.save_to.map(|to| (to, false)))
            .map_err(err)?;
        if let Some(load) = &mut self.expert_load {
            load.flush(&self.gpu.stream).map_err(err)?;
        }
        Ok(out)
    }
}
