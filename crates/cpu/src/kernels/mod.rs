//! The dozen operations of a llama forward pass, all in f32 and batch-invariant.

pub mod activation;
pub mod attention;
pub mod matmul;
pub mod norm;
pub mod rope;
pub mod simd;

#[cfg(test)]
mod tests;
