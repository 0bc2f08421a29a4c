// The gated MLP's activations on f32 values, shared by gated_activation.cu and the fused
// one-token gate/up GEMV (gemv_fused.cu), which must round alike.
// SwiGLU (llama, qwen, mistral): silu(g) = g / (1 + e^-g).
// GeGLU (gemma, `gelu_pytorch_tanh`): gelu(g) = g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))).
#pragma once
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
