// The arithmetic of RMSNorm over the residual stream, shared by add_rmsnorm (rmsnorm.cu) and
// the fused one-token GEMVs that normalise their own input (gemv_fused.cu), which must round
// alike: each thread adds sum_sq4 of its float4s in order, the block sums (block_sum), then
//   out = bf16(v * inv_rms * weight).
#pragma once
#include "common.cuh"

__device__ __forceinline__ float sum_sq4(const float4 v) {
    return v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
}

__device__ __forceinline__ float inv_rms_of(float sum_sq, int hidden, float eps) {
    return rsqrtf(sum_sq / (float)hidden + eps);
}

// Four normalised values as two bf16 pairs.
__device__ __forceinline__ void store_normed4(__nv_bfloat162* o2, const float4 v, float inv_rms,
                                              const float4 w) {
    o2[0] = __floats2bfloat162_rn(v.x * inv_rms * w.x, v.y * inv_rms * w.y);
    o2[1] = __floats2bfloat162_rn(v.z * inv_rms * w.z, v.w * inv_rms * w.w);
}
