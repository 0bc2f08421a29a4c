// Token embedding lookup: one row of the bf16 table per token, widened to the f32 residual and
// multiplied by the model's embedding scale (gemma: sqrt(hidden); 1 elsewhere, which is exact).
#include "common.cuh"

// x[t, :] = table[tokens[t], :] * scale; grid = tokens, block = any multiple of 32;
// hidden % 8 == 0.
extern "C" __global__ void embedding_gather(const bf16* __restrict__ table,
                                            const i32* __restrict__ tokens,
                                            float* __restrict__ x, int hidden, float scale) {
    pdl_enter();
    const int t = blockIdx.x;
    const uint4* row = reinterpret_cast<const uint4*>(table + (i64)tokens[t] * hidden);
    float4* out = reinterpret_cast<float4*>(x + (i64)t * hidden);
    for (int c = threadIdx.x; c < hidden / 8; c += blockDim.x) {
        float v[8];
        unpack8(row[c], v);
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] *= scale;
        out[2 * c] = make_float4(v[0], v[1], v[2], v[3]);
        out[2 * c + 1] = make_float4(v[4], v[5], v[6], v[7]);
    }
}
