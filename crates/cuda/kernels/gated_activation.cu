// The gated MLP activation between the fused gate/up projection and the down projection:
//   out[t, i] = bf16(act(gu[t, i]) * gu[t, inter + i])
// gu is f32, or bf16 where cuBLAS wrote it so (prompt chunks: half the bytes of the step's
// largest intermediate, written and read once each).
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

// Four gate and four up values of row `row` from column 4c: f32 or bf16 rows of 2 * inter.
__device__ __forceinline__ void load4(const float* row, int inter, int c, float4& g, float4& u) {
    g = reinterpret_cast<const float4*>(row)[c];
    u = reinterpret_cast<const float4*>(row + inter)[c];
}
__device__ __forceinline__ void load4(const bf16* row, int inter, int c, float4& g, float4& u) {
    g = load4_bf16(row + 4 * c);
    u = load4_bf16(row + inter + 4 * c);
}

// grid = (ceil(inter / 4 / blockDim), tokens); inter % 4 == 0.
template <typename Act, typename In>
__device__ __forceinline__ void gated_activation(const In* __restrict__ gate_up,
                                                 bf16* __restrict__ out, int inter) {
    pdl_enter();
    const int t = blockIdx.y;
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= inter / 4) return;
    float4 g, u;
    load4(gate_up + (i64)t * 2 * inter, inter, c, g, u);
    __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(out + (i64)t * inter);
    o2[2 * c] = __floats2bfloat162_rn(Act::apply(g.x) * u.x, Act::apply(g.y) * u.y);
    o2[2 * c + 1] = __floats2bfloat162_rn(Act::apply(g.z) * u.z, Act::apply(g.w) * u.w);
}

#define GATED_KERNEL(NAME, ACT, IN)                                                         \
    extern "C" __global__ void NAME(const IN* __restrict__ gate_up, bf16* __restrict__ out, \
                                    int inter) {                                            \
        gated_activation<ACT, IN>(gate_up, out, inter);                                     \
    }
GATED_KERNEL(silu_mul, Silu, float)
GATED_KERNEL(gelu_tanh_mul, GeluTanh, float)
GATED_KERNEL(silu_mul_bf16, Silu, bf16)
GATED_KERNEL(gelu_tanh_mul_bf16, GeluTanh, bf16)
