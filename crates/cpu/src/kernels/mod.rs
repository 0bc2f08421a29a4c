//! The dozen operations of a llama forward pass, all in f32 and batch-invariant.

pub mod activation;
mod amx;
pub mod attention;
pub mod bf16_activations;
pub mod bf16_decode;
pub mod bf16_gemm;
pub mod int8_gemm;
pub mod int8_support;
pub mod matmul;
pub mod norm;
pub mod q8_activations;
pub(crate) mod qgemm;
pub mod quant_matrix;
pub mod rope;

#[cfg(test)]
mod tests;
