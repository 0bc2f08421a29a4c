//! Random GGUF-quantized tensors for the GPU tests (ferrite_model::dummy::quantized): the CPU
//! backend's dequantizer, exact against the GGUF reference, is the oracle the GPU is checked
//! against on the same bytes.

use ferrite_model::weights::DType;

/// `rows` x `cols` random blocks of `dtype` with weights of about `scale`.
pub fn random_blocks(dtype: DType, rows: usize, cols: usize, scale: f32, seed: u64) -> Vec<u8> {
    ferrite_model::dummy::quantized::random_blocks(dtype, rows, cols, scale, seed)
}
