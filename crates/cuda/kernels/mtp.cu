// A multi-token-prediction layer's input (ferrite_model::plan::MtpSpec has the math), and
// copies of hidden-state rows between the step's residual stream and the rows kept per slot.
#include "common.cuh"

// grid = pairs, block = 256. Pair r: its token's embedding row emb[r] (f32) and a hidden row
// h: the step's residual row step_rows[src[r]] when src[r] >= 0, else kept row ring[-1 - src[r]]
// (both residuals before their final norm: the target's, or the MTP layer's own output).
//   out[r] = bf16([enorm(emb[r]); hnorm(first(h))]), [2 hidden] a row,
// first = the target's final norm (first_norm[r] == 0) or the MTP's output norm (1).
extern "C" __global__ void mtp_input(const float* __restrict__ emb,
                                     const float* __restrict__ step_rows,
                                     const float* __restrict__ ring, const i32* __restrict__ src,
                                     const i32* __restrict__ first_norm,
                                     const float* __restrict__ output_norm_w,
                                     const float* __restrict__ head_norm_w,
                                     const float* __restrict__ enorm_w,
                                     const float* __restrict__ hnorm_w, bf16* __restrict__ out,
                                     int hidden, float eps) {
    __shared__ float scratch[32];
    const int r = blockIdx.x;
    const int from = src[r];
    const float* first_w = first_norm[r] ? head_norm_w : output_norm_w;
    pdl_enter();
    const float* e = emb + (i64)r * hidden;
    const float* h = from >= 0 ? step_rows + (i64)from * hidden : ring + (i64)(-1 - from) * hidden;
    bf16* o = out + (i64)r * 2 * hidden;
    float e_sq = 0.0f, h_sq = 0.0f;
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
        e_sq += e[c] * e[c];
        h_sq += h[c] * h[c];
    }
    const float e_inv = rsqrtf(block_sum(e_sq, scratch) / (float)hidden + eps);
    const float h_inv = rsqrtf(block_sum(h_sq, scratch) / (float)hidden + eps);
    // The first norm's output g, then its own norm.
    float g_sq = 0.0f;
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
        const float g = h[c] * h_inv * first_w[c];
        g_sq += g * g;
        o[c] = __float2bfloat16(e[c] * e_inv * enorm_w[c]);
    }
    const float g_inv = rsqrtf(block_sum(g_sq, scratch) / (float)hidden + eps);
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
        const float g = h[c] * h_inv * first_w[c];
        o[hidden + c] = __float2bfloat16(g * g_inv * hnorm_w[c]);
    }
}

// grid = rows, block = 256: dst[dst_rows[i]] = src[src_rows[i]], rows of `hidden` f32.
extern "C" __global__ void copy_rows(const float* __restrict__ src, const i32* __restrict__ src_rows,
                                     float* __restrict__ dst, const i32* __restrict__ dst_rows,
                                     int hidden) {
    const i64 from = (i64)src_rows[blockIdx.x] * hidden, to = (i64)dst_rows[blockIdx.x] * hidden;
    pdl_enter();
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) dst[to + c] = src[from + c];
}
