//! Launchers of kernels/sampling.cu: next-token sampling of logits rows on the device, in two
//! kernels (per-chunk winners, then the pick per row), and the per-row parameters they read,
//! laid out as the kernels' `SampleParams` struct.

use ferrite_engine::DeviceSampling;

use super::launch::{grid1, Kernels, Shape};
use super::signatures::{ApplyTokenMask, SamplePartial, SampleTokens};
use crate::device_ptr::DevicePtr;

/// Threads of the sampling kernel (its radix select needs exactly 2 bins per thread).
const SAMPLE_THREADS: u32 = 1024;
/// Vocabulary chunk and threads of `sample_partial` (PARTIAL_CHUNK / PARTIAL_THREADS there).
const SAMPLE_CHUNK: usize = 4096;
const SAMPLE_PARTIAL_THREADS: u32 = 256;

/// The sampling parameters of one row, as the kernels' `SampleParams` struct (the layout is
/// tested below).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SampleParams {
    pub temperature: f32,
    pub top_p: f32,
    pub min_p: f32,
    /// 0 disables top-k.
    pub top_k: i32,
    pub seed: u64,
    pub counter: u64,
}

impl From<&DeviceSampling> for SampleParams {
    fn from(s: &DeviceSampling) -> Self {
        SampleParams {
            temperature: s.temperature,
            top_p: s.top_p,
            min_p: s.min_p,
            top_k: s.top_k.min(i32::MAX as u32) as i32,
            seed: s.seed,
            counter: s.counter,
        }
    }
}

/// Arguments of [`Kernels::sample`].
#[derive(Debug, Clone, Copy)]
pub struct SampleArgs {
    /// f32 [.., vocab] logits.
    pub logits: DevicePtr,
    /// i32 [n]: the logits rows to sample.
    pub rows: DevicePtr,
    /// [n] [`SampleParams`].
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
        let partial = SamplePartial {
            logits: a.logits,
            rows: a.rows,
            params: a.params,
            part_v,
            part_i,
            vocab,
        };
        let shape = Shape {
            grid: (chunks as u32, n as u32, 1),
            block: SAMPLE_PARTIAL_THREADS,
        };
        self.launch(shape, &partial)?;
        let pick = SampleTokens {
            logits: a.logits,
            rows: a.rows,
            params: a.params,
            tokens: a.tokens,
            vocab,
            part_v,
            part_i,
            chunks,
        };
        self.launch(grid1(n, SAMPLE_THREADS), &pick)
    }

    /// Forbids, in logits rows `rows[0..n]`, every token whose bit is clear in the row's mask
    /// (`masks`: u32 [n, ceil(vocab / 32)], bit t % 32 of word t / 32 for token t).
    pub fn apply_token_mask(
        &self,
        logits: DevicePtr,
        rows: DevicePtr,
        masks: DevicePtr,
        vocab: usize,
        n: usize,
    ) -> anyhow::Result<()> {
        let params = ApplyTokenMask {
            logits,
            rows,
            masks,
            vocab,
            words: vocab.div_ceil(32),
        };
        let shape = Shape {
            grid: (vocab.div_ceil(256) as u32, n as u32, 1),
            block: 256,
        };
        self.launch(shape, &params)
    }

    /// Bytes of chunk winners `sample` needs for `n` rows.
    pub fn sample_partials_len(n: usize, vocab: usize) -> usize {
        n * vocab.div_ceil(SAMPLE_CHUNK) * 2 * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_cuda_struct() {
        // float, float, float, int, u64, u64: 32 bytes, the u64s 8-aligned at 16 and 24.
        assert_eq!(std::mem::size_of::<SampleParams>(), 32);
        assert_eq!(std::mem::align_of::<SampleParams>(), 8);
        let p = SampleParams {
            seed: 1,
            ..Default::default()
        };
        let base = &p as *const _ as usize;
        assert_eq!(&p.top_k as *const _ as usize - base, 12);
        assert_eq!(&p.seed as *const _ as usize - base, 16);
        assert_eq!(&p.counter as *const _ as usize - base, 24);
    }
}
