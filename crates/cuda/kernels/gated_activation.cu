// The gated MLP activation between the fused gate/up projection and the down projection:
//   out[t, i] = bf16(act(gu[t, i]) * gu[t, inter + i])
// SwiGLU (llama, qwen, mistral): silu(g) = g / (1 + e^-g).
// GeGLU (gemma, `gelu_pytorch_tanh`): gelu(g) = g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))).
// One kernel per activation (the model's config picks one), sharing the loop.
#include "common.cuh"

struct Silu {
    static __device__ __forceinline__ float apply(float g) { return g / (1.0f + __expf(-g)); }
};

struct GeluTanh {
    static __device__ __forceinline__ float apply(float g) {
        const float inner = 0.7978845608028654f * (g + 0.044715f * g * g * g);
        return 0.5f * g * (1.0f + tanhf(inner));
    }
};

// grid = (ceil(inter / 4 / blockDim), tokens); inter % 4 == 0.
template <typename Act>
__device__ __forceinline__ void gated_activation(const float* __restrict__ gate_up,
                                                 bf16* __restrict__ out, int inter) {
    pdl_enter();
    const int t = blockIdx.y;
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= inter / 4) return;
    const float4* row = reinterpret_cast<const float4*>(gate_up + (i64)t * 2 * inter);
    const float4 g = row[c];
    const float4 u = row[inter / 4 + c];
    __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(out + (i64)t * inter);
    o2[2 * c] = __floats2bfloat162_rn(Act::apply(g.x) * u.x, Act::apply(g.y) * u.y);
    o2[2 * c + 1] = __floats2bfloat162_rn(Act::apply(g.z) * u.z, Act::apply(g.w) * u.w);
}

extern "C" __global__ void silu_mul(const float* __restrict__ gate_up, bf16* __restrict__ out,
                                    int inter) {
    gated_activation<Silu>(gate_up, out, inter);
}

extern "C" __global__ void gelu_tanh_mul(const float* __restrict__ gate_up,
                                         bf16* __restrict__ out, int inter) {
    gated_activation<GeluTanh>(gate_up, out, inter);
}
