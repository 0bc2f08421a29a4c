//! The end of a step: the LM-head rows of a chunk sampled on the device (with constrained
//! rows' token masks applied first) or downloaded for the host to sample.

use ferrite_engine::SampledOutput;

use super::CudaBackend;
use crate::buffer::{download, upload};
use crate::launchers::SampleArgs;

impl CudaBackend {
    /// Gathers LM-head rows `c0..c1` (now in logits-buffer rows `0..c1 - c0`): samples the
    /// device rows among them, downloads the host rows.
    pub(super) fn collect(
        &mut self,
        c0: usize,
        c1: usize,
        out: &mut SampledOutput,
    ) -> anyhow::Result<()> {
        let vocab = self.config.vocab_size;
        let stream = &self.gpu.stream;
        self.sample_rows.clear();
        self.sample_params.clear();
        let in_chunk = |row: usize| (c0..c1).contains(&row);
        self.mask_rows.clear();
        self.mask_words.clear();
        let words = vocab.div_ceil(32);
        for (_, row, params) in self.inputs.device_rows.iter().filter(|d| in_chunk(d.1)) {
            self.sample_rows.push((row - c0) as i32);
            self.sample_params.push(params.into());
            if let Some(mask) = &params.mask {
                // Waits for the mask job still computing it (the forward is already queued).
                // A failed constraint leaves nothing allowed: the commit ends that request.
                self.mask_rows.push((row - c0) as i32);
                let at = self.mask_words.len();
                self.mask_words.resize(at + words, 0);
                let dst = &mut self.mask_words[at..];
                let _ = mask.with_words(|w| {
                    let n = w.len().min(words);
                    dst[..n].copy_from_slice(&w[..n]);
                });
            }
        }
        let n = self.sample_rows.len();
        if n > 0 {
            upload(stream, self.ws.sample_rows, &self.sample_rows)?;
            upload(stream, self.ws.sample_params, &self.sample_params)?;
            if !self.mask_rows.is_empty() {
                upload(stream, self.ws.mask_rows, &self.mask_rows)?;
                upload(stream, self.ws.mask_words, &self.mask_words)?;
                let (logits, rows, masks) = (self.ws.logits, self.ws.mask_rows, self.ws.mask_words);
                let masked = self.mask_rows.len();
                self.kernels
                    .apply_token_mask(logits, rows, masks, vocab, masked)?;
            }
            self.kernels.sample(&SampleArgs {
                logits: self.ws.logits,
                rows: self.ws.sample_rows,
                params: self.ws.sample_params,
                tokens: self.ws.sampled,
                partials: self.ws.sample_partials,
                vocab,
                n,
            })?;
            self.sampled.resize(n, 0);
            download(stream, self.ws.sampled, &mut self.sampled)?;
            let device = self.inputs.device_rows.iter().filter(|d| in_chunk(d.1));
            for (&(i, _, _), &token) in device.zip(&self.sampled) {
                out.tokens[i] = Some(token as u32);
            }
        }
        // Host rows ascend: download each run of consecutive rows in one copy.
        let rows: Vec<usize> = self
            .inputs
            .host_rows
            .iter()
            .copied()
            .filter(|&r| in_chunk(r))
            .collect();
        let mut i = 0;
        while i < rows.len() {
            let mut j = i + 1;
            while j < rows.len() && rows[j] == rows[j - 1] + 1 {
                j += 1;
            }
            let first = rows[i] - c0;
            let logits = &mut out.forward.logits;
            let at = logits.len();
            logits.resize(at + (j - i) * vocab, 0.0);
            download(
                stream,
                self.ws.logits.offset(first * vocab * 4),
                &mut logits[at..],
            )?;
            i = j;
        }
        if n == 0 && rows.is_empty() {
            stream.synchronize()?;
        }
        Ok(())
    }
}
