// Skinny matrix products for small decode batches (1..8 tokens), where a GEMM library tiles for
// large M and leaves bandwidth unused: y[t, r] = sum_k W[r, k] * x[t, k].
// W is bf16 [rows, K] (rows contiguous), x bf16 [NT, K], y f32 [NT, ldy] (ldy >= rows: a part of
// a wider output); K % 8 == 0.
//
// One warp per output row (or SPLIT warps, each over a contiguous 1/SPLIT of K, so that long
// rows such as the down projection's keep enough loads in flight); each lane streams 16-byte
// words of the row (8 in flight) so the weights are read exactly once and fully coalesced; x
// is small and shared by every warp, so it goes through the read-only cache. Accumulation in
// f32 (gemv.cuh).
#include "gemv.cuh"

struct RowStore {
    float* __restrict__ y;
    int ldy, row;
    __device__ __forceinline__ void store(int t, const float (&v)[1]) { y[(i64)t * ldy + row] = v[0]; }
};

// grid = ceil(rows / (8 / SPLIT)), block = 256 (8 warps).
template <int NT, int SPLIT>
__device__ __forceinline__ void gemv_rows(const bf16* __restrict__ w, const bf16* __restrict__ x,
                                          float* __restrict__ y, int rows, int k, int ldy) {
    const int row = gemv_group_index<SPLIT>();
    const int rows_of_group[1] = {row};
    RowStore out{y, ldy, row};
    gemv_group<NT, SPLIT, 1, 8>(w, k, rows_of_group, row < rows, GlobalInput{x, k}, out);
}

#define GEMV_KERNEL(NT, SPLIT)                                                             \
    extern "C" __global__ void gemv_bf16_##NT##_s##SPLIT(const bf16* __restrict__ w,        \
                                                         const bf16* __restrict__ x,        \
                                                         float* __restrict__ y, int rows,   \
                                                         int k, int ldy) {                  \
        gemv_rows<NT, SPLIT>(w, x, y, rows, k, ldy);                                       \
    }
#define GEMV_KERNELS(NT) GEMV_KERNEL(NT, 1) GEMV_KERNEL(NT, 4) GEMV_KERNEL(NT, 8)
GEMV_KERNELS(1)
GEMV_KERNELS(2)
GEMV_KERNELS(3)
GEMV_KERNELS(4)
GEMV_KERNELS(5)
GEMV_KERNELS(6)
GEMV_KERNELS(7)
GEMV_KERNELS(8)
