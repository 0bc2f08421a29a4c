// The experts' gated activation, shared by the skinny (moe_experts.cu) and tiled (moe_tile.cu)
// expert products.
#pragma once
#include "common.cuh"

// The gated activations of the experts, in f32 as the CPU's (crates/cpu/src/kernels/
// activation.rs): SwiGLU silu(g) u (the dense path's gated_activation.cu formula), or
// gpt-oss's clamped SwiGLU (u' + 1) g' sigmoid(alpha g') with g' = min(g, limit),
// u' = clamp(u, -limit, limit).
struct ExpertActivation {
    int clamped;
    float alpha, limit;
    __device__ __forceinline__ float operator()(float g, float u) const {
        if (!clamped) return g / (1.0f + __expf(-g)) * u;
        const float x = fminf(g, limit);
        const float glu = x * (1.0f / (1.0f + expf(-(x * alpha))));
        return (fminf(fmaxf(u, -limit), limit) + 1.0f) * glu;
    }
};
