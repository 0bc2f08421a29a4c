//! Shared by the GPU tests: opening the device (or saying loudly that there is none), random
//! inputs, bf16 conversion, and device buffers filled from or read into host vectors.
#![allow(dead_code)]

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ferrite_cuda::buffer::{download, upload, DeviceBuffer};
use ferrite_cuda::device::Gpu;
use ferrite_cuda::launchers::Kernels;
use half::bf16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub struct Ctx {
    pub gpu: Gpu,
    pub kernels: Kernels,
}

/// The GPU, or `None` after printing why the test does not run (never a silent pass).
pub fn gpu(test: &str) -> Option<Ctx> {
    match Gpu::open(0) {
        Ok(gpu) => {
            let kernels = Kernels::load(&gpu.stream).expect("loading the kernels");
            Some(Ctx { gpu, kernels })
        }
        Err(e) => {
            eprintln!("SKIPPED {test}: no CUDA device ({e})");
            println!("SKIPPED {test}: no CUDA device");
            None
        }
    }
}

pub mod compare;
pub mod engine_run;
pub mod experts;
pub mod fixtures;
pub mod quant;
pub mod teacher_forced;

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

pub fn random(rng: &mut StdRng, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-scale..scale)).collect()
}

/// Values rounded to bf16 (what the device will see), as f32.
pub fn bf16_round(v: &[f32]) -> Vec<f32> {
    v.iter().map(|&x| bf16::from_f32(x).to_f32()).collect()
}

pub fn to_bf16(v: &[f32]) -> Vec<bf16> {
    v.iter().map(|&x| bf16::from_f32(x)).collect()
}

pub fn stream(ctx: &Ctx) -> &Arc<CudaStream> {
    &ctx.gpu.stream
}

/// A device buffer holding `data`.
pub fn dev<T: Copy>(ctx: &Ctx, data: &[T]) -> DeviceBuffer {
    let buf = DeviceBuffer::new(stream(ctx), std::mem::size_of_val(data).max(4)).unwrap();
    upload(stream(ctx), buf.ptr(), data).unwrap();
    buf
}

/// A device buffer of `n` elements of `T`, poisoned with 0xff bytes (NaN in f32 and bf16, -1
/// in i32) so that an element the kernel fails to write shows up.
pub fn poisoned<T>(ctx: &Ctx, n: usize) -> DeviceBuffer {
    let buf = DeviceBuffer::new(stream(ctx), (n * std::mem::size_of::<T>()).max(4)).unwrap();
    buf.fill(0xff).unwrap();
    buf
}

pub fn read_f32(ctx: &Ctx, buf: &DeviceBuffer, n: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; n];
    download(stream(ctx), buf.ptr(), &mut out).unwrap();
    out
}

pub fn read_bf16(ctx: &Ctx, buf: &DeviceBuffer, n: usize) -> Vec<f32> {
    let mut out = vec![bf16::ZERO; n];
    download(stream(ctx), buf.ptr(), &mut out).unwrap();
    out.iter().map(|v| v.to_f32()).collect()
}

pub fn read_i32(ctx: &Ctx, buf: &DeviceBuffer, n: usize) -> Vec<i32> {
    let mut out = vec![0i32; n];
    download(stream(ctx), buf.ptr(), &mut out).unwrap();
    out
}

/// ||got - want|| / ||want||, with NaN (an unwritten element) as infinity.
pub fn rel_err(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let mut num = 0.0;
    let mut den = 0.0;
    for (&g, &w) in got.iter().zip(want) {
        if !g.is_finite() {
            return f64::INFINITY;
        }
        num += (g as f64 - w).powi(2);
        den += w * w;
    }
    (num / den.max(1e-30)).sqrt()
}

pub fn check(name: &str, got: &[f32], want: &[f64], tol: f64) {
    let e = rel_err(got, want);
    println!("{name}: relative error {e:.2e} (tolerance {tol:.0e})");
    assert!(e <= tol, "{name}: relative error {e:.3e} > {tol:.0e}");
}
