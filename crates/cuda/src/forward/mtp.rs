//! A multi-token-prediction layer's pass on the GPU (`ferrite_model::plan::MtpSpec` has the
//! math; the CPU's crate::mtp is the same pass): pairs (token `p + 1`, hidden row `h_p`) at
//! positions `p`, their input rows `eh_proj · [enorm(embed); hnorm(h)]`, then either the K/V
//! of the layer's attention alone (the catch-up after a target step) or the whole layer, its
//! output norm and the LM head (a draft step).

use super::{HeadRows, Model, StepShape};
use crate::launchers::{Lookup, MtpInputArgs};
use crate::weights::{Mixer, MtpWeights};

impl Model<'_> {
    /// The pending projection of the last layer (`delta_pending`) added into `x`, for the
    /// step's `n` rows: `x` then holds each row's final residual, as an MTP pass reads it.
    pub fn fold_residual(&self, n: usize, delta_pending: bool) -> anyhow::Result<()> {
        if !delta_pending {
            return Ok(());
        }
        self.add_norm(n, Some(self.ws.delta), None, self.weights.output_norm)
    }

    /// An MTP pass over the step `s` (its metadata uploaded: the pairs' tokens at their
    /// positions): with `draft`, the whole layer and the logits of every pair (f32 rows of
    /// the logits buffer) and its output copied to the ring; else the layer's K/V only.
    pub fn enqueue_mtp(
        &self,
        s: &StepShape,
        mtp: &MtpWeights,
        rows: &HeadRows,
        draft: bool,
    ) -> anyhow::Result<()> {
        let (k, ws, w) = (self.kernels, self.ws, self.weights);
        let (n, hidden) = (s.num_tokens, self.config.hidden_size);
        // The pairs' token embeddings, beside the residual rows they pair with.
        k.embed_tokens(
            &w.embed,
            &Lookup {
                tokens: self.meta(s.offsets.tokens),
                x: ws.delta,
                hidden,
                scale: w.embedding_scale,
                n,
            },
        )?;
        k.mtp_input(&MtpInputArgs {
            emb: ws.delta,
            step_rows: rows.step_rows,
            ring: rows.ring,
            src: rows.src,
            first_norm: rows.first_norm,
            output_norm: w.output_norm,
            head_norm: mtp.head_norm,
            enorm: mtp.enorm,
            hnorm: mtp.hnorm,
            out: rows.input,
            hidden,
            eps: w.norm.eps,
            n,
        })?;
        if !draft {
            // The target's rows kept before the pass overwrites them.
            self.copy_to_ring(rows, ws.x)?;
        }
        self.linear(n, rows.input, &mtp.eh_proj, ws.x)?;
        if !draft {
            let Mixer::Attention(a) = &mtp.layer.mixer else {
                anyhow::bail!("the MTP layer has no attention");
            };
            self.add_norm(n, None, None, mtp.layer.attn_norm)?;
            return self.enqueue_attention(s, mtp.index, a, ws.xn, true);
        }
        let delta_pending = self.enqueue_layer(s, mtp.index, &mtp.layer, false)?;
        // x += the layer's last projection; xn = its output norm, the LM head's input.
        self.add_norm(n, delta_pending.then_some(ws.delta), None, mtp.head_norm)?;
        self.copy_to_ring(rows, ws.x)?;
        self.linear(n, ws.xn, &w.lm_head, ws.logits)
    }
}
