// Warp-level tensor-core products (`mma.sync.m16n8k16`, f32 sums) shared by the skinny
// products: quant_gemv_mma.cu, fp8_gemv_mma.cu and gemv_mma.cu.
//
// Fragments (PTX ISA, m16n8k16 with 16-bit inputs), lane = 4 g + t: A (16 x 16, row-major)
// a0 = (row g, k 2t..2t+1), a1 = (row g + 8, same k), a2 = (row g, k 2t+8..2t+9),
// a3 = (row g + 8, same k); B (16 x 8) b0 = (k 2t..2t+1, column g), b1 = (k 2t+8..2t+9,
// column g); C (16 x 8) c0, c1 = (row g, columns 2t, 2t+1), c2, c3 = (row g + 8, same).
#pragma once
#include "common.cuh"

__device__ __forceinline__ void mma_bf16(float (&c)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0,
                                         u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_f16(float (&c)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0,
                                        u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
