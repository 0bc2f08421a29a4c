//! Linear layers, y = x W^T with bf16 activations and f32 accumulation and output (bf16
//! output, or y += x W^T, where the caller asks and cuBLAS runs the product:
//! [`Gemm::linear_bf16`], [`Gemm::linear_add`]).
//!
//! Batch-invariant (opt-in, `CudaOptions::batch_invariant`): bf16 products of any number
//! of tokens go through the two tensor-core kernels that sum in one fixed order
//! (kernels/bf16_order.cuh), so a token's output does not depend on what shares its step.
//! Otherwise (the default): cuBLAS for real batches, the GEMV kernels for 1..=8 tokens
//! (decode), where a GEMM library leaves memory bandwidth unused; the threshold is
//! `FERRITE_GEMV_MAX_TOKENS` (0..=8, default 8). cuBLAS picks its algorithm by shape, so a
//! row's rounding then depends on how many rows share the product.
//!
//! Quantized matrices (crate::quant) go through their own GEMV kernels, which dequantize in
//! registers (one token on a Q4_K or Q6_K matrix: through the tensor cores, see
//! kernels/quant_gemv_mma.cu); 2..=64 tokens through kernels/quant_gemv_ordered.cu (each
//! block of weights decoded into shared memory once, the tokens' products on the tensor
//! cores); for larger batches a slab of rows at a time is dequantized into a bf16 scratch
//! buffer and multiplied by cuBLAS, so no bf16 copy of the model is ever resident. FP8
//! matrices above 8 tokens with batch invariance off go to Hopper's FP8 tensor cores instead
//! (crate::fp8_gemm, activations quantized per token; `FERRITE_FP8_GEMM=0` keeps the slabs).

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cublas::{result as cublas, sys};
use cudarc::driver::CudaStream;

use crate::buffer::DeviceBuffer;
use crate::device_ptr::DevicePtr;
use crate::fp8_gemm::Fp8Gemm;
use crate::launchers::{
    tensor_core_k, Kernels, LinearArgs, QuantGemvArgs, GEMV_MAX_TOKENS, SKINNY_MAX_TOKENS,
};
use crate::linear::{Linear, MatrixFormat};
use crate::quant::QuantType;

pub use crate::buffer::Scratch;

/// cuBLAS workspace: set explicitly so that graph capture never makes it allocate.
const WORKSPACE_BYTES: usize = 64 << 20;

pub struct Gemm {
    handle: sys::cublasHandle_t,
    _workspace: DeviceBuffer,
    gemv_max_tokens: usize,
    batch_invariant: bool,
    /// FP8 products on the FP8 tensor cores, or why not.
    fp8: Result<Fp8Gemm, String>,
}

// The handle is used only from the thread that owns the backend at a time.
unsafe impl Send for Gemm {}

impl Gemm {
    pub fn new(stream: &Arc<CudaStream>, batch_invariant: bool) -> anyhow::Result<Gemm> {
        stream.context().bind_to_thread()?;
        let handle = cublas::create_handle().map_err(|e| {
            anyhow::anyhow!("cannot create a cuBLAS handle (is libcublas.so.13 installed?): {e:?}")
        })?;
        let workspace = DeviceBuffer::new(stream, WORKSPACE_BYTES)?;
        unsafe {
            cublas::set_stream(handle, stream.cu_stream() as sys::cudaStream_t)
                .map_err(|e| anyhow::anyhow!("cublasSetStream: {e:?}"))?;
            sys::cublasSetWorkspace_v2(
                handle,
                workspace.ptr().raw() as *mut c_void,
                WORKSPACE_BYTES,
            )
            .result()
            .map_err(|e| anyhow::anyhow!("cublasSetWorkspace: {e:?}"))?;
        }
        let gemv_max_tokens = std::env::var("FERRITE_GEMV_MAX_TOKENS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(GEMV_MAX_TOKENS)
            .min(GEMV_MAX_TOKENS);
        let fp8 = if batch_invariant {
            Err("batch invariance is on (quantized activations would depend on the path)".into())
        } else if std::env::var("FERRITE_FP8_GEMM").is_ok_and(|v| v == "0") {
            Err("FERRITE_FP8_GEMM=0".into())
        } else {
            Fp8Gemm::new(stream, workspace.ptr(), WORKSPACE_BYTES).map_err(|e| e.to_string())
        };
        Ok(Gemm {
            handle,
            _workspace: workspace,
            gemv_max_tokens,
            batch_invariant,
            fp8,
        })
    }

    /// How FP8 matrices are multiplied above 8 tokens, for the start-up log and the tests.
    pub fn fp8_products(&self) -> String {
        match &self.fp8 {
            Ok(_) => "FP8 tensor cores (cuBLASLt, f32 out)".into(),
            Err(why) => format!("dequantized to bf16: {why}"),
        }
    }

    /// y[n, lin.rows] (f32) = x[n, lin.k] (bf16) · W^T, part by part.
    pub fn linear(
        &self,
        kernels: &Kernels,
        x: DevicePtr,
        lin: &Linear,
        y: DevicePtr,
        n: usize,
        scratch: Scratch,
    ) -> anyhow::Result<()> {
        if n == 0 {
            return Ok(());
        }
        let k = lin.k;
        for part in &lin.parts {
            let y = y.offset(4 * part.row0);
            let planes = part.matrix.planes;
            match (part.matrix.format, part.matrix.bf16_data(), &self.fp8) {
                (MatrixFormat::Bf16, Some(w), _) => {
                    let args = LinearArgs {
                        x,
                        w,
                        y,
                        n,
                        rows: part.rows,
                        k,
                        ldy: lin.rows,
                    };
                    self.bf16_product(kernels, &args)?;
                }
                // Several tokens (all, under batch invariance) on the tensor cores, each
                // block of weights decoded once for all of them: the CUDA-core GEMVs decode per
                // token, the slabs write and read a bf16 copy (FP8 has kernels of its own).
                (MatrixFormat::Quant(format), _, _)
                    if n <= SKINNY_MAX_TOKENS
                        && tensor_core_k(k)
                        && (self.batch_invariant || (n > 1 && format != QuantType::Fp8)) =>
                {
                    kernels.qgemv_ordered(&QuantGemvArgs {
                        format,
                        planes,
                        x,
                        y,
                        n,
                        rows: part.rows,
                        k,
                        ldy: lin.rows,
                    })?;
                }
                (MatrixFormat::Quant(format), _, _) if n <= self.gemv_max_tokens => {
                    kernels.qgemv(&QuantGemvArgs {
                        format,
                        planes,
                        x,
                        y,
                        n,
                        rows: part.rows,
                        k,
                        ldy: lin.rows,
                    })?;
                }
                // The product runs in the guard; a shape cuBLASLt does not take falls through to
                // the slabs below.
                (MatrixFormat::Quant(QuantType::Fp8), _, Ok(fp8))
                    if fp8.linear_part(
                        kernels,
                        x,
                        &part.matrix,
                        y,
                        n,
                        part.rows,
                        k,
                        lin.rows,
                        scratch,
                    )? => {}
                (MatrixFormat::Quant(format), _, _) => {
                    // A slab of rows at a time through the scratch buffer, a multiple of
                    // SLAB_ROW_MULTIPLE: an odd slab (256 MiB / 10,240 bytes = 26,214 rows of
                    // a 5,120-wide matrix) leaves the next slab's output 8-byte aligned, and
                    // cuBLAS then runs sm_80's align2 kernels (2026-12-07 profile of the 27B
                    // shape's prefill: its MLP products at ~265 TFLOP/s).
                    let slab = slab_rows(scratch.bytes, k, part.rows);
                    let mut r0 = 0;
                    while r0 < part.rows {
                        let rows = slab.min(part.rows - r0);
                        kernels.qdequant(format, planes, scratch.ptr, r0, rows, k)?;
                        self.bf16_many(
                            kernels,
                            &LinearArgs {
                                x,
                                w: scratch.ptr,
                                y: y.offset(4 * r0),
                                n,
                                rows,
                                k,
                                ldy: lin.rows,
                            },
                            true,
                        )?;
                        r0 += rows;
                    }
                }
                (MatrixFormat::Bf16, None, _) => anyhow::bail!("a bf16 matrix without data"),
            }
        }
        Ok(())
    }

    /// y[n, lin.rows] = x · W^T written as bf16, when cuBLAS runs every part of it
    /// ([`Gemm::cublas_runs`]): `Ok(false)`, with nothing launched, otherwise, and the caller
    /// takes [`Gemm::linear`]'s f32. For an intermediate whose next reader rounds to bf16 anyway
    /// (the MLP's gate and up halves, the QKV rows RoPE reads), this halves the bytes written
    /// and read.
    pub fn linear_bf16(
        &self,
        x: DevicePtr,
        lin: &Linear,
        y: DevicePtr,
        n: usize,
    ) -> anyhow::Result<bool> {
        self.cublas_parts(x, lin, y, n, Epilogue::Bf16)
    }

    /// y[n, lin.rows] (f32) += x · W^T, the addition in cuBLAS's epilogue (beta = 1), under
    /// the same condition as [`Gemm::linear_bf16`]: a projection that joins the residual
    /// stream adds itself instead of leaving a delta for the next norm to read.
    pub fn linear_add(
        &self,
        x: DevicePtr,
        lin: &Linear,
        y: DevicePtr,
        n: usize,
    ) -> anyhow::Result<bool> {
        self.cublas_parts(x, lin, y, n, Epilogue::AddF32)
    }

    /// Whether cuBLAS runs every part of `lin` for `n` tokens: bf16 matrices, more tokens
    /// than the GEMVs take, batch invariance off.
    fn cublas_runs(&self, lin: &Linear, n: usize) -> bool {
        n > self.gemv_max_tokens
            && !self.batch_invariant
            && lin.parts.iter().all(|p| p.matrix.bf16_data().is_some())
    }

    fn cublas_parts(
        &self,
        x: DevicePtr,
        lin: &Linear,
        y: DevicePtr,
        n: usize,
        epilogue: Epilogue,
    ) -> anyhow::Result<bool> {
        if !self.cublas_runs(lin, n) {
            return Ok(false);
        }
        let item = match epilogue {
            Epilogue::Bf16 => 2,
            Epilogue::F32 | Epilogue::AddF32 => 4,
        };
        for part in &lin.parts {
            let Some(w) = part.matrix.bf16_data() else {
                anyhow::bail!("a bf16 matrix without data"); // every part has it (cublas_runs)
            };
            let a = LinearArgs {
                x,
                w,
                y: y.offset(item * part.row0),
                n,
                rows: part.rows,
                k: lin.k,
                ldy: lin.rows,
            };
            self.cublas_to(&a, epilogue)?;
        }
        Ok(true)
    }

    /// The product of bf16 operands `a`: batch-invariant, or the GEMV kernels up to
    /// `FERRITE_GEMV_MAX_TOKENS` tokens and cuBLAS beyond.
    pub fn bf16_product(&self, kernels: &Kernels, a: &LinearArgs) -> anyhow::Result<()> {
        if a.n == 0 {
            return Ok(());
        }
        if a.n <= self.gemv_max_tokens && !self.invariant_for(a) {
            return kernels.gemv(a);
        }
        self.bf16_many(kernels, a, false)
    }

    /// A product of more tokens than the GEMVs take (or of any number when invariant);
    /// `weights_just_written`: `a.w` is a slab the dequantizer has just written
    /// (crate::launchers::gemv: the skinny kernel must then wait for it before its first loads).
    fn bf16_many(
        &self,
        kernels: &Kernels,
        a: &LinearArgs,
        weights_just_written: bool,
    ) -> anyhow::Result<()> {
        if self.invariant_for(a) {
            return kernels.invariant_product(a, weights_just_written);
        }
        self.cublas(a)
    }

    /// Whether `a` goes through the batch-invariant kernels: when asked for and k fits them
    /// (every model shape ferrite runs has k % 32 == 0).
    fn invariant_for(&self, a: &LinearArgs) -> bool {
        self.batch_invariant && tensor_core_k(a.k)
    }

    /// The same product through cuBLAS whatever `n` (tests compare it with the GEMV).
    pub fn cublas(&self, a: &LinearArgs) -> anyhow::Result<()> {
        self.cublas_to(a, Epilogue::F32)
    }

    /// [`Gemm::cublas`] with the output `epilogue` asks for (f32 accumulation either way).
    fn cublas_to(&self, a: &LinearArgs, epilogue: Epilogue) -> anyhow::Result<()> {
        let &LinearArgs {
            x,
            w,
            y,
            n,
            rows,
            k,
            ldy,
        } = a;
        // Column-major view: Y^T[rows, n] = W[rows, k] (stored as k x rows, transposed) · X^T[k, n],
        // Y^T's columns `ldy` apart.
        let (y_type, beta) = match epilogue {
            Epilogue::F32 => (sys::cudaDataType::CUDA_R_32F, 0.0f32),
            Epilogue::AddF32 => (sys::cudaDataType::CUDA_R_32F, 1.0),
            Epilogue::Bf16 => (sys::cudaDataType::CUDA_R_16BF, 0.0),
        };
        let alpha = 1.0f32;
        unsafe {
            cublas::gemm_ex(
                self.handle,
                sys::cublasOperation_t::CUBLAS_OP_T,
                sys::cublasOperation_t::CUBLAS_OP_N,
                rows as i32,
                n as i32,
                k as i32,
                &alpha as *const f32 as *const c_void,
                w.raw() as *const c_void,
                sys::cudaDataType::CUDA_R_16BF,
                k as i32,
                x.raw() as *const c_void,
                sys::cudaDataType::CUDA_R_16BF,
                k as i32,
                &beta as *const f32 as *const c_void,
                y.raw() as *mut c_void,
                y_type,
                ldy as i32,
                sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                sys::cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
            )
        }
        .map_err(|e| anyhow::anyhow!("cublasGemmEx {n}x{rows}x{k}: {e:?}"))
    }
}

/// What cuBLAS writes: y = x W^T as f32 or bf16, or y += x W^T (f32).
#[derive(Debug, Clone, Copy)]
enum Epilogue {
    F32,
    Bf16,
    AddF32,
}

impl Drop for Gemm {
    fn drop(&mut self) {
        let _ = unsafe { cublas::destroy_handle(self.handle) };
    }
}

/// What a slab too small for a whole matrix is cut to a multiple of: its outputs stay 512-byte
/// aligned and the row counts tile evenly.
const SLAB_ROW_MULTIPLE: usize = 128;

/// Rows of a `rows`-row matrix the dequantizing scratch takes at a time: all of them when they
/// fit, else whole multiples of SLAB_ROW_MULTIPLE, or what fits.
fn slab_rows(scratch_bytes: usize, k: usize, rows: usize) -> usize {
    let fits = (scratch_bytes / (2 * k)).max(1);
    if fits >= rows {
        rows
    } else if fits >= SLAB_ROW_MULTIPLE {
        fits / SLAB_ROW_MULTIPLE * SLAB_ROW_MULTIPLE
    } else {
        fits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slabs_are_whole_multiples_that_fit() {
        // The 27B shape's gate/up (34,816 x 5,120) in the 256 MiB scratch: 26,214 rows fit.
        assert_eq!(slab_rows(256 << 20, 5120, 34_816), 26_112);
        // A matrix that fits goes whole, whatever its row count.
        assert_eq!(slab_rows(256 << 20, 5120, 26_000), 26_000);
        for (bytes, k) in [
            (256usize << 20, 4096usize),
            (1 << 20, 17_408),
            (3000, 1000),
            (10, 64),
        ] {
            let fits = (bytes / (2 * k)).max(1);
            let rows = slab_rows(bytes, k, usize::MAX);
            assert!(
                rows >= 1 && rows <= fits,
                "{bytes} bytes, k {k}: {rows} of {fits}"
            );
            assert!(fits < SLAB_ROW_MULTIPLE || rows % SLAB_ROW_MULTIPLE == 0);
        }
    }
}
