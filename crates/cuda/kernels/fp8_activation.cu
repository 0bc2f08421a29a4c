// What the FP8 tensor-core GEMM (crate::fp8_gemm, cuBLASLt with 1 x 128 block scales on both
// operands) needs around it:
// - fp8_quantize_rows: bf16 activations [n, k] as e4m3 [n, k] plus an f32 scale per token and
//   block of 128 (the blocks the FP8 weights use), stored block-major ([k / 128, n]) as
//   cuBLASLt reads 1-D block scales. A block's scale maps its largest magnitude to e4m3's 448:
//   scale = amax / 448, q = e4m3_rn_satfinite(x * (448 / amax)) (an all-zero block: scale 0,
//   q 0). Per token and block, so a token's bytes do not depend on the other tokens.
// - fp8_scales_by_k: a weight's scales from ferrite's block order ([rows, k / 128], beside
//   each block's bytes: crate::quant) to cuBLASLt's ([k / 128, rows]), once at load.
// - copy_rows_f32: a product computed for tokens padded to a multiple of 4 (what cuBLASLt
//   takes) into the output rows (row stride ldy), real tokens only.
#include "common.cuh"

// Four floats as four e4m3 bytes, first float in the lowest byte. cvt puts its first source
// in the upper byte of each pair.
__device__ __forceinline__ u32 e4m3x4(float v0, float v1, float v2, float v3) {
    unsigned short lo, hi;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(v1), "f"(v0));
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(v3), "f"(v2));
    return (u32)lo | ((u32)hi << 16);
}

// A warp per (token, block of 128), eight warps a thread block; k % 128 == 0. Tokens
// n_valid .. n are padding (cuBLASLt takes token counts in steps of 4): zero bytes, scale 0.
extern "C" __global__ void fp8_quantize_rows(const bf16* __restrict__ x,
                                             unsigned char* __restrict__ q,
                                             float* __restrict__ scales, int n, int n_valid,
                                             int k) {
    pdl_enter();
    const int blocks = k / 128;
    const i64 item = (i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (item >= (i64)n * blocks) return;
    const int lane = threadIdx.x & 31;
    const int t = (int)(item / blocks);
    const int b = (int)(item % blocks);
    const i64 at = (i64)t * k + b * 128 + lane * 4;
    const float4 v = t < n_valid ? load4_bf16(x + at) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
    amax = warp_max(amax);
    const float inv = amax > 0.0f ? 448.0f / amax : 0.0f;
    *reinterpret_cast<u32*>(q + at) = e4m3x4(v.x * inv, v.y * inv, v.z * inv, v.w * inv);
    if (lane == 0) scales[(i64)b * n + t] = amax / 448.0f;
}

// by_k[b, r] = by_row[r, b] for `rows` rows of `blocks` scales; a thread per scale.
extern "C" __global__ void fp8_scales_by_k(const float* __restrict__ by_row,
                                           float* __restrict__ by_k, int rows, int blocks) {
    pdl_enter();
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (i64)rows * blocks) return;
    const int b = (int)(i / rows);
    const int r = (int)(i % rows);
    by_k[i] = by_row[(i64)r * blocks + b];
}

// y[t, c] (row stride ldy) = src[t, c] (f32 [n, m]): a padded product's real rows into the
// output; grid = (ceil(m / blockDim), n).
extern "C" __global__ void copy_rows_f32(const float* __restrict__ src, float* __restrict__ y,
                                         int m, int ldy) {
    pdl_enter();
    const int t = blockIdx.y;
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= m) return;
    y[(i64)t * ldy + c] = src[(i64)t * m + c];
}
