//! The dozen operations of a llama forward pass, all in f32 and batch-invariant.

pub mod activation;
pub mod attention;
pub mod matmul;
pub mod norm;
pub(crate) mod qgemm;
pub mod quant_matrix;
pub mod rope;
pub mod simd;
#[cfg(target_arch = "x86_64")]
pub(crate) mod vec16;

#[cfg(test)]
mod tests;
