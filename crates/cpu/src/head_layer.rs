//! A draft head's decoder layer over a pass's rows, for `draft_head.rs`'s heads (`mtp.rs`,
//! `eagle3.rs`): the whole layer through `Model::run_layer`, or only its K/V written.

use ferrite_engine::{BackendError, SeqBatch};
use ferrite_model::plan::LayerSpec;

use crate::attention_layer::{write_kv, RopeTables, StepTokens};
use crate::kernels::norm::rms_norm;
use crate::kernels::rope;
use crate::kv_cache::KvCache;
use crate::model::{Model, Workspace};
use crate::model_weights::{LayerWeights, Mixer};
use crate::simd::Isa;

/// (batch index, position) of every token of a head pass's batch, in order.
pub(crate) fn pass_tokens(batch: &[SeqBatch<'_>]) -> Vec<(usize, usize)> {
    batch
        .iter()
        .enumerate()
        .flat_map(|(b, s)| (0..s.tokens.len()).map(move |i| (b, s.start_pos + i)))
        .collect()
}

impl Model {
    /// A head's decoder layer over a pass's rows `x` (the residual stream; `tokens` from
    /// [`pass_tokens`]): its attention reads `mixer_input`, or `x` normed as in any layer.
    /// With `whole`, the layer runs and `x` is its output; else only its K/V are written.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn head_layer(
        &self,
        isa: Isa,
        (spec, layer): (&LayerSpec, &LayerWeights),
        kv: &mut KvCache,
        batch: &[SeqBatch<'_>],
        tokens: &[(usize, usize)],
        x: &mut [f32],
        mixer_input: Option<&[f32]>,
        whole: bool,
        ws: &mut Workspace,
    ) -> Result<(), BackendError> {
        let (n, eps) = (tokens.len(), self.norm_eps());
        let positions: Vec<usize> = tokens.iter().map(|&(_, pos)| pos).collect();
        let rope = self
            .rope_of(spec)
            .ok_or_else(|| BackendError("the draft head's RoPE is none of the model's".into()))?;
        // The layout of every RoPE, the table of the head's alone.
        let layout = rope::table_layout(self.ropes(), n);
        let width = layout.iter().map(|(_, w)| n * w).sum();
        ws.cos_sin.resize(ws.cos_sin.len().max(width), 0.0);
        let at = rope..rope + 1;
        let (ropes, tables) = (&self.ropes()[at.clone()], &layout[at]);
        rope::fill_tables(ropes, tables, &positions, &mut ws.cos_sin[..width]);
        let step = StepTokens { batch, tokens };
        if whole {
            let layer = (spec.index, layer, rope);
            return self.run_layer(isa, layer, x, kv, None, &step, &layout, mixer_input, ws);
        }
        let Mixer::Attention(a) = &layer.mixer else {
            return Err(BackendError(
                "the draft head's layer has no attention".into(),
            ));
        };
        let normed;
        let input = match mixer_input {
            Some(input) => input,
            None => {
                let hidden = x.len() / n;
                let mut rows = vec![0.0f32; x.len()];
                for (dst, src) in rows.chunks_exact_mut(hidden).zip(x.chunks_exact(hidden)) {
                    rms_norm(isa, src, &layer.attn_norm, eps, dst);
                }
                normed = rows;
                &normed
            }
        };
        let (at, width) = layout[rope];
        let tables = RopeTables {
            rope: &self.ropes()[rope],
            tables: &ws.cos_sin[at..at + n * width],
            width,
        };
        let l = spec.index;
        write_kv(
            isa,
            a,
            l,
            kv,
            &step,
            &tables,
            input,
            n,
            eps,
            &mut ws.attention,
        );
        Ok(())
    }
}
