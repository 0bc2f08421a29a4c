//! Launchers of kernels/fp8_activation.cu: what the FP8 tensor-core GEMM (crate::fp8_gemm)
//! needs around cuBLASLt — activations quantized per token and block of 128, weight scales
//! in cuBLASLt's block-major order, and a padded product's rows copied into the output.

use super::launch::{grid1, Kernels, Shape};
use super::signatures::{CopyRowsF32, Fp8QuantizeRows, Fp8ScalesByK};
use crate::device_ptr::DevicePtr;

/// Elements per FP8 block (ferrite_model::fp8::BLOCK): the granularity of every scale here.
pub const FP8_BLOCK: usize = 128;

impl Kernels {
    /// q[t, :] (e4m3 [n, k]) and scales[b, t] (f32 [k / 128, n]) from x (bf16 [n_valid, k]):
    /// each block of 128 of a token scaled so its largest magnitude is 448; tokens n_valid..n
    /// are zero (padding).
    pub fn fp8_quantize_rows(
        &self,
        x: DevicePtr,
        q: DevicePtr,
        scales: DevicePtr,
        n: usize,
        n_valid: usize,
        k: usize,
    ) -> anyhow::Result<()> {
        anyhow::ensure!(
            k.is_multiple_of(FP8_BLOCK) && n_valid <= n,
            "FP8 activations need k % 128 == 0 and n_valid <= n, not k = {k}, {n_valid} of {n}"
        );
        let warps = n * (k / FP8_BLOCK);
        let params = Fp8QuantizeRows {
            x,
            q,
            scales,
            n,
            n_valid,
            k,
        };
        self.launch(grid1(warps.div_ceil(8), 256), &params)
    }

    /// by_k[b, r] = by_row[r, b]: an FP8 matrix's `rows` x `blocks` scales, block-major.
    pub fn fp8_scales_by_k(
        &self,
        by_row: DevicePtr,
        by_k: DevicePtr,
        rows: usize,
        blocks: usize,
    ) -> anyhow::Result<()> {
        let params = Fp8ScalesByK {
            by_row,
            by_k,
            rows,
            blocks,
        };
        self.launch(grid1((rows * blocks).div_ceil(256), 256), &params)
    }

    /// y[t, c] (row stride `ldy`) = src[t, c] (f32 [n, m]).
    pub fn copy_rows_f32(
        &self,
        src: DevicePtr,
        y: DevicePtr,
        n: usize,
        m: usize,
        ldy: usize,
    ) -> anyhow::Result<()> {
        let shape = Shape {
            grid: (m.div_ceil(256) as u32, n as u32, 1),
            block: 256,
        };
        self.launch(shape, &CopyRowsF32 { src, y, m, ldy })
    }
}
