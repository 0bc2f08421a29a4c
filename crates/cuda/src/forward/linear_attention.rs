//! A Gated DeltaNet layer's part of the step (crate::forward): its input projection, the
//! causal convolution and the gated delta rule over each sequence's recurrent-state slot.

use super::{Model, StepShape};
use crate::device_ptr::DevicePtr;
use crate::launchers::{GdnLayer, GdnRecurrenceArgs, GdnSequences};
use crate::weights::LinearAttentionWeights;

impl Model<'_> {
    /// Gated DeltaNet layer `g` from the normed rows `ws.xn`: the input projection (f32), the
    /// convolution and the gated delta rule over each sequence's state slot; returns the bf16
    /// rows the output projection reads.
    pub(super) fn enqueue_linear_attention(
        &self,
        s: &StepShape,
        g: &LinearAttentionWeights,
    ) -> anyhow::Result<DevicePtr> {
        let (k, ws, o) = (self.kernels, self.ws, s.offsets);
        let buffers = ws
            .linear
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("no linear-attention buffers"))?;
        let state = self
            .state
            .ok_or_else(|| anyhow::anyhow!("linear attention before init_state_slots"))?;
        self.gemm
            .linear(k, ws.xn, &g.w_in, buffers.mixed, s.num_tokens, ws.dequant)?;
        if let Some(recording) = self.recording {
            recording.record(g.state_offset, buffers.mixed)?;
        }
        let seqs = GdnSequences {
            row: self.meta(o.seq_row),
            len: self.meta(o.seq_len),
            slot: self.meta(o.seq_slot),
            fresh: self.meta(o.seq_fresh),
            count: s.num_seqs,
            tokens: s.num_tokens,
            max_len: s.max_q_len,
            state,
            slot_stride: self.weights.state_len,
        };
        self.enqueue_gdn(&seqs, g, buffers.mixed, buffers.ld)?;
        Ok(buffers.out)
    }

    /// The convolution and gated delta rule of layer `g` over `seqs`, from input projections
    /// `mixed` (rows `ld` floats apart), into the workspace's linear-attention buffers.
    pub(crate) fn enqueue_gdn(
        &self,
        seqs: &GdnSequences,
        g: &LinearAttentionWeights,
        mixed: DevicePtr,
        ld: usize,
    ) -> anyhow::Result<()> {
        let (k, spec) = (self.kernels, &g.spec);
        let buffers = self
            .ws
            .linear
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("no linear-attention buffers"))?;
        let layer = GdnLayer {
            key_heads: spec.num_key_heads,
            value_heads: spec.num_value_heads,
            dk: spec.key_head_dim,
            dv: spec.value_head_dim,
            taps: spec.conv_kernel,
            tiled: spec.tiled_value_heads,
            offset: g.state_offset,
        };
        k.gdn_conv(seqs, &layer, mixed, ld, g.conv, buffers.conv)?;
        let channels = spec.conv_channels();
        let value_dim = spec.value_dim();
        k.gdn_delta_rule(
            seqs,
            &layer,
            &GdnRecurrenceArgs {
                conv: buffers.conv,
                mixed,
                ld,
                z_col: channels,
                b_col: channels + value_dim,
                a_col: channels + value_dim + spec.num_value_heads,
                decay_rate: g.decay_rate,
                dt_bias: g.dt_bias,
                norm: g.norm,
                out: buffers.out,
                chunk: buffers.chunk,
                eps: self.weights.norm.eps,
            },
        )
    }
}
