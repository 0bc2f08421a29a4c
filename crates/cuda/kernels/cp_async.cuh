// Asynchronous global -> shared copies (sm_80+), shared by the kernels that stage tiles:
// tile_mma.cu and attention_prefill.cu. A thread's copies form groups (one per commit); a
// wait leaves at most N of its newest groups in flight, and a barrier after it makes every
// thread's finished copies visible to the block.
#pragma once
#include "common.cuh"

// 16 bytes from `gmem` to `smem`, bypassing registers; `src_bytes` < 16 fills the rest with
// zeros (0: nothing is read from `gmem`).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
    const u32 s = (u32)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
                 "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
