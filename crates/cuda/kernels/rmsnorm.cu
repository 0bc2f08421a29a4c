// RMSNorm, two kernels. add_rmsnorm: the residual add fused in front of it:
//   x[r] += delta[r] (+ bias)   (when given; the residual stream stays f32; `bias` is the
//                                preceding projection's, gpt-oss's attention output bias)
//   out[r] = bf16(x[r] / sqrt(mean(x[r]^2) + eps) * weight)
// `rows` (optional) picks which rows of x to normalise into out's consecutive rows: the
// final norm runs only on the rows whose logits are wanted.
#include "common.cuh"

// Values per thread kept in registers between the two passes: hidden <= 4 * 8 * blockDim.
#define NORM_MAX_PER_THREAD 8

// grid = output rows, block = 256 (any multiple of 32 works); hidden % 4 == 0.
// Only x and delta come from earlier kernels: the row index (host-written step metadata) and
// the norm weights are read before waiting for the previous kernel (common.cuh), and the row
// stays in registers between the sum of squares and the scaling.
extern "C" __global__ void add_rmsnorm(float* __restrict__ x, const float* __restrict__ delta,
                                       const float* __restrict__ weight,
                                       const i32* __restrict__ rows, bf16* __restrict__ out,
                                       int hidden, float eps, const float* __restrict__ bias) {
    __shared__ float scratch[32];
    const int r = rows ? rows[blockIdx.x] : blockIdx.x;
    const int n4 = hidden / 4;
    const float4* w4 = reinterpret_cast<const float4*>(weight);
    const bool in_registers = n4 <= NORM_MAX_PER_THREAD * (int)blockDim.x;
    float4 wv[NORM_MAX_PER_THREAD], v[NORM_MAX_PER_THREAD];
    if (in_registers) {
#pragma unroll
        for (int i = 0; i < NORM_MAX_PER_THREAD; ++i) {
            const int c = threadIdx.x + i * blockDim.x;
            if (c < n4) wv[i] = w4[c];
        }
    }
    pdl_enter();
    float4* xr = reinterpret_cast<float4*>(x + (i64)r * hidden);
    const float4* dr = delta ? reinterpret_cast<const float4*>(delta + (i64)r * hidden) : nullptr;
    const float4* br = reinterpret_cast<const float4*>(bias);
    // x + (delta + bias), the CPU's order (the projection's bias joins its output first).
    auto add = [&](float4& v, int c) {
        float4 d = dr ? dr[c] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (br) {
            const float4 b = br[c];
            d.x += b.x; d.y += b.y; d.z += b.z; d.w += b.w;
        }
        v.x += d.x; v.y += d.y; v.z += d.z; v.w += d.w;
        xr[c] = v;
    };
    __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(out + (i64)blockIdx.x * hidden);
    float sum_sq = 0.0f;
    if (in_registers) {
#pragma unroll
        for (int i = 0; i < NORM_MAX_PER_THREAD; ++i) {
            const int c = threadIdx.x + i * blockDim.x;
            if (c < n4) {
                v[i] = xr[c];
                if (dr || br) add(v[i], c);
                sum_sq += v[i].x * v[i].x + v[i].y * v[i].y + v[i].z * v[i].z + v[i].w * v[i].w;
            }
        }
    } else {
        for (int c = threadIdx.x; c < n4; c += blockDim.x) {
            float4 u = xr[c];
            if (dr || br) add(u, c);
            sum_sq += u.x * u.x + u.y * u.y + u.z * u.z + u.w * u.w;
        }
    }
    sum_sq = block_sum(sum_sq, scratch);
    const float inv_rms = rsqrtf(sum_sq / (float)hidden + eps);
    if (in_registers) {
#pragma unroll
        for (int i = 0; i < NORM_MAX_PER_THREAD; ++i) {
            const int c = threadIdx.x + i * blockDim.x;
            if (c < n4) {
                o2[2 * c] = __floats2bfloat162_rn(v[i].x * inv_rms * wv[i].x, v[i].y * inv_rms * wv[i].y);
                o2[2 * c + 1] = __floats2bfloat162_rn(v[i].z * inv_rms * wv[i].z, v[i].w * inv_rms * wv[i].w);
            }
        }
        return;
    }
    for (int c = threadIdx.x; c < n4; c += blockDim.x) {
        const float4 u = xr[c];
        const float4 w = w4[c];
        o2[2 * c] = __floats2bfloat162_rn(u.x * inv_rms * w.x, u.y * inv_rms * w.y);
        o2[2 * c + 1] = __floats2bfloat162_rn(u.z * inv_rms * w.z, u.w * inv_rms * w.w);
    }
}

// RMSNorm in place on f32 rows of `dim` values, `heads` rows per token, `token_stride` floats
// from one token's first row to the next's: the Q or K heads inside the QKV projection's output
// (qwen3 and gemma3 normalise each head before RoPE), or a whole [tokens, hidden] activation
// with heads = 1 (gemma3's post-attention and post-MLP norms, whose output stays f32 to join
// the residual stream).
//   row = row / sqrt(mean(row^2) + eps) * weight      (weight: f32 [dim])
// grid = ceil(rows / 4), block = 128: one warp per row; dim and token_stride % 4 == 0.
extern "C" __global__ void rmsnorm_rows(float* __restrict__ x, const float* __restrict__ weight,
                                        int rows, int heads, int token_stride, int dim,
                                        float eps) {
    pdl_enter();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int r = blockIdx.x * (blockDim.x >> 5) + warp;
    if (r >= rows) return;
    float4* row = reinterpret_cast<float4*>(x + (i64)(r / heads) * token_stride +
                                            (i64)(r % heads) * dim);
    const float4* w4 = reinterpret_cast<const float4*>(weight);
    const int n4 = dim / 4;
    float sum_sq = 0.0f;
    for (int c = lane; c < n4; c += 32) {
        const float4 v = row[c];
        sum_sq += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    sum_sq = warp_sum(sum_sq);
    const float inv_rms = rsqrtf(sum_sq / (float)dim + eps);
    for (int c = lane; c < n4; c += 32) {
        const float4 v = row[c];
        const float4 w = w4[c];
        row[c] = make_float4(v.x * inv_rms * w.x, v.y * inv_rms * w.y, v.z * inv_rms * w.z,
                             v.w * inv_rms * w.w);
    }
}
