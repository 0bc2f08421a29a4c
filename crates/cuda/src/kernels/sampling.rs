//! Launchers of kernels/sampling.cu: next-token sampling of logits rows on the device, in two
//! kernels (per-chunk winners, then the pick per row).

use super::launch::{grid1, Args, Kernels, Shape};
use crate::device_ptr::DevicePtr;

/// Threads of the sampling kernel (its radix select needs exactly 2 bins per thread).
const SAMPLE_THREADS: u32 = 1024;
/// Vocabulary chunk and threads of `sample_partial` (PARTIAL_CHUNK / PARTIAL_THREADS there).
const SAMPLE_CHUNK: usize = 4096;
const SAMPLE_PARTIAL_THREADS: u32 = 256;

/// Arguments of [`Kernels::sample`].
#[derive(Debug, Clone, Copy)]
pub struct SampleArgs {
    /// f32 [.., vocab] logits.
    pub logits: DevicePtr,
    /// i32 [n]: the logits rows to sample.
    pub rows: DevicePtr,
    /// [n] `crate::sampling::SampleParams`.
    pub params: DevicePtr,
    /// i32 [n]: the sampled token ids.
    pub tokens: DevicePtr,
    /// `Kernels::sample_partials_len(n, vocab)` bytes of chunk winners.
    pub partials: DevicePtr,
    pub vocab: usize,
    /// Rows.
    pub n: usize,
}

impl Kernels {
    /// Samples logits rows `rows[0..n]` with `params[0..n]` into `tokens[0..n]`.
    pub fn sample(&self, a: &SampleArgs) -> anyhow::Result<()> {
        let (vocab, n) = (a.vocab, a.n);
        let chunks = vocab.div_ceil(SAMPLE_CHUNK);
        let (part_v, part_i) = (a.partials, a.partials.offset(n * chunks * 2 * 4));
        // sample_partial(logits, rows, params, part_v, part_i, vocab)
        let args = Args::new()
            .ptr(a.logits)
            .ptr(a.rows)
            .ptr(a.params)
            .ptr(part_v)
            .ptr(part_i)
            .usize(vocab);
        let shape = Shape {
            grid: (chunks as u32, n as u32, 1),
            block: SAMPLE_PARTIAL_THREADS,
        };
        self.launch("sample_partial", shape, args)?;
        // sample_tokens(logits, rows, params, tokens, vocab, part_v, part_i, chunks)
        let args = Args::new()
            .ptr(a.logits)
            .ptr(a.rows)
            .ptr(a.params)
            .ptr(a.tokens)
            .usize(vocab)
            .ptr(part_v)
            .ptr(part_i)
            .usize(chunks);
        self.launch("sample_tokens", grid1(n, SAMPLE_THREADS), args)
    }

    /// Bytes of chunk winners `sample` needs for `n` rows.
    pub fn sample_partials_len(n: usize, vocab: usize) -> usize {
        n * vocab.div_ceil(SAMPLE_CHUNK) * 2 * 8
    }
}
