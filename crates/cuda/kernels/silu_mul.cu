// SwiGLU between the fused gate/up projection and the down projection:
//   out[t, i] = bf16(silu(gu[t, i]) * gu[t, inter + i]),  silu(g) = g / (1 + e^-g)
#include "common.cuh"

// grid = (ceil(inter / 4 / blockDim), tokens); inter % 4 == 0.
extern "C" __global__ void silu_mul(const float* __restrict__ gate_up, bf16* __restrict__ out,
                                    int inter) {
    pdl_enter();
    const int t = blockIdx.y;
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= inter / 4) return;
    const float4* row = reinterpret_cast<const float4*>(gate_up + (i64)t * 2 * inter);
    const float4 g = row[c];
    const float4 u = row[inter / 4 + c];
    __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(out + (i64)t * inter);
    o2[2 * c] = __floats2bfloat162_rn(g.x / (1.0f + __expf(-g.x)) * u.x,
                                      g.y / (1.0f + __expf(-g.y)) * u.y);
    o2[2 * c + 1] = __floats2bfloat162_rn(g.z / (1.0f + __expf(-g.z)) * u.z,
                                          g.w / (1.0f + __expf(-g.w)) * u.w);
}
