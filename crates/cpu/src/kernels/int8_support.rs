//! Whether the int8 path (`int8_gemm`) can run: the weight types it has integer kernels for
//! and the instructions it needs. Apart from the kernels, so that a matrix (`quant_matrix`)
//! can ask without depending on the code that multiplies it.

use ferrite_model::weights::DType;

/// Whether this machine can run the int8 path (AVX-512 BW/DQ/VL with VNNI).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512dq")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512vnni")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The weight types the int8 path multiplies (the rest of a model keeps the f32 path).
pub fn supports(dtype: DType) -> bool {
    matches!(dtype, DType::Q4_K | DType::Q6_K)
}
