// RMSNorm with the residual add fused in front of it:
//   x[r] += delta[r]            (when delta is given; the residual stream stays f32)
//   out[r] = bf16(x[r] / sqrt(mean(x[r]^2) + eps) * weight)
// `rows` (optional) picks which rows of x to normalise into out's consecutive rows: the
// final norm runs only on the rows whose logits are wanted.
#include "common.cuh"

// grid = output rows, block = 256 (any multiple of 32 works); hidden % 4 == 0.
extern "C" __global__ void add_rmsnorm(float* __restrict__ x, const float* __restrict__ delta,
                                       const float* __restrict__ weight,
                                       const i32* __restrict__ rows, bf16* __restrict__ out,
                                       int hidden, float eps) {
    pdl_enter();
    __shared__ float scratch[32];
    const int r = rows ? rows[blockIdx.x] : blockIdx.x;
    float4* xr = reinterpret_cast<float4*>(x + (i64)r * hidden);
    const float4* dr = delta ? reinterpret_cast<const float4*>(delta + (i64)r * hidden) : nullptr;
    const int n4 = hidden / 4;
    float sum_sq = 0.0f;
    for (int c = threadIdx.x; c < n4; c += blockDim.x) {
        float4 v = xr[c];
        if (dr) {
            const float4 d = dr[c];
            v.x += d.x; v.y += d.y; v.z += d.z; v.w += d.w;
            xr[c] = v;
        }
        sum_sq += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    sum_sq = block_sum(sum_sq, scratch);
    const float inv_rms = rsqrtf(sum_sq / (float)hidden + eps);
    const float4* w4 = reinterpret_cast<const float4*>(weight);
    __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(out + (i64)blockIdx.x * hidden);
    for (int c = threadIdx.x; c < n4; c += blockDim.x) {
        const float4 v = xr[c];
        const float4 w = w4[c];
        o2[2 * c] = __floats2bfloat162_rn(v.x * inv_rms * w.x, v.y * inv_rms * w.y);
        o2[2 * c + 1] = __floats2bfloat162_rn(v.z * inv_rms * w.z, v.w * inv_rms * w.w);
    }
}
