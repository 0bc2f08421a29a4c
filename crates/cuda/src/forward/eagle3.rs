//! An EAGLE-3 head's pass on the GPU (`ferrite_model::plan::Eagle3Spec` has the math; the
//! CPU's crate::eagle3 of ferrite-cpu is the same pass): pairs (token `p + 1`, row `g` at `p`)
//! at positions `p`, the attention's input `[input_norm(embed); hidden_norm(g)]` and the
//! residual `g`, then either the K/V of the head's attention alone (the catch-up after a
//! target step) or the whole layer, its output norm and its LM head (a draft step).

use super::{HeadRows, Model, StepShape};
use crate::device_ptr::DevicePtr;
use crate::launchers::{Eagle3InputArgs, Lookup};
use crate::weights::{Eagle3Weights, Mixer};

impl Model<'_> {
    /// The target rows `g = fc · [a_1; a_2; a_3]` of a step's `n` tokens, from the layer
    /// inputs captured during the step (bf16 [n, 3 hidden]) into `out` (f32 [n, hidden]).
    pub fn eagle3_target_rows(
        &self,
        n: usize,
        head: &Eagle3Weights,
        captured: DevicePtr,
        out: DevicePtr,
    ) -> anyhow::Result<()> {
        self.linear(n, captured, &head.fc, out)
    }

    /// An EAGLE-3 pass over the step `s` (its metadata uploaded: the pairs' tokens at their
    /// positions): with `draft`, the whole layer and the logits of every pair over the
    /// target's vocabulary (-inf outside the draft vocabulary; `draft_logits` f32
    /// [pairs, draft vocab] in between), the rows the next step continues from copied to the
    /// ring; else the head's K/V only, and the step's target rows kept.
    pub fn enqueue_eagle3(
        &self,
        s: &StepShape,
        head: &Eagle3Weights,
        rows: &HeadRows,
        draft_logits: DevicePtr,
        draft: bool,
    ) -> anyhow::Result<()> {
        let (k, ws, w) = (self.kernels, self.ws, self.weights);
        let (n, hidden) = (s.num_tokens, self.config.hidden_size);
        let options = &head.spec.options;
        // The pairs' token embeddings, as the CPU reads them (unscaled).
        k.embed_tokens(
            head.embedding.as_ref().unwrap_or(&w.embed),
            &Lookup {
                tokens: self.meta(s.offsets.tokens),
                x: ws.delta,
                hidden,
                scale: 1.0,
                n,
            },
        )?;
        k.eagle3_input(&Eagle3InputArgs {
            emb: ws.delta,
            step_rows: rows.step_rows,
            ring: rows.ring,
            src: rows.src,
            input_norm: head.layer.attn_norm,
            hidden_norm: head.hidden_norm,
            out: rows.input,
            resid: ws.x,
            hidden,
            eps: head.spec.norm.eps,
            residual_normed: options.residual_normed,
            n,
        })?;
        let index = head.spec.index();
        if !draft {
            self.copy_to_ring(rows, rows.step_rows)?;
            let Mixer::Attention(a) = &head.layer.mixer else {
                anyhow::bail!("the EAGLE-3 head has no attention");
            };
            return self.enqueue_attention(s, index, a, rows.input, true);
        }
        let delta_pending = self.enqueue_layer_from(s, index, &head.layer, Some(rows.input))?;
        // x = h2 (the layer's output), xn = norm(h2), the LM head's input.
        self.add_norm(n, delta_pending.then_some(ws.delta), None, head.output_norm)?;
        match &head.lm_head {
            None => self.linear(n, ws.xn, &w.lm_head, ws.logits)?,
            Some((lm_head, d2t)) => {
                self.linear(n, ws.xn, lm_head, draft_logits)?;
                let vocab = self.config.vocab_size;
                k.scatter_draft_logits(draft_logits, *d2t, ws.logits, lm_head.rows, vocab, n)?;
            }
        }
        if options.feed_normed {
            // The next step continues from norm(h2), in f32.
            self.norm_rows(n, ws.x, head.output_norm, 1, hidden, hidden)?;
        }
        self.copy_to_ring(rows, ws.x)
    }
}
