// One rotary-embedding rotation, shared by rope_kv.cu and the fused one-token QKV GEMV
// (gemv_fused.cu), which must round alike: the pair (a, b) of a head turned by
// angle = position * inv_freq[i].
#pragma once
#include "common.cuh"

__device__ __forceinline__ void rope_rotate(float a, float b, float angle, float& ra, float& rb) {
    float s, c;
    sincosf(angle, &s, &c);
    ra = a * c - b * s;
    rb = b * c + a * s;
}
