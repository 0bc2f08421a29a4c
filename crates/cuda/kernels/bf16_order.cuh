// The batch-invariant order of a bf16 product's sums, which gemv_mma.cu (1..64 tokens) and
// tile_mma.cu (more) both compute, so that y[t, r] = sum_k W[r, k] x[t, k] comes out bit for
// bit the same whichever kernel runs and however many tokens share the launch:
//
// - k is cut into 128-element blocks (the last one zero-padded when k % 128 != 0);
// - the blocks are shared among SPLIT parts, contiguous and in order, ceil(blocks / SPLIT)
//   each, SPLIT a function of k alone (gemv.rs, bf16_order_split_index);
// - a part's sum starts at 0 and takes its blocks in order, each block in 8 `mma.m16n8k16`
//   steps (f32 accumulate); step j puts elements 32 u + 4 j .. + 3 of the block (u = 0..3) in
//   the mma's k slots 2 u, 2 u + 1, 2 u + 8, 2 u + 9, weight row r at row r % 16 of the A
//   fragment and token t at column t % 8 of B;
// - the result is ((0 + part 0) + part 1) + ... + part SPLIT-1, in f32.
//
// Every choice a faster kernel could make differently (which warp or block holds a partial,
// how many tokens a tile spans) leaves this order alone.
#pragma once
#include "common.cuh"
#include "quant.cuh"
#include "mma.cuh"

__device__ __forceinline__ int bf16_order_blocks(int k) { return (k + 127) / 128; }

// The mma of one 16-row x 8-token tile over elements 32 u + 8 i + 4 h .. + 3 of a block (step
// j = 2 i + h): w0 / w8 are the lane's uint4 i of rows g and g + 8 (elements 32 u + 8 i .. + 7;
// u = lane % 4, g = lane / 4), xv the same of token g.
__device__ __forceinline__ void bf16_order_mma(float (&c)[4], const uint4& w0, const uint4& w8,
                                               const uint4& xv, int h) {
    const int lo = 2 * h;
    mma_bf16(c, word_of(w0, lo), word_of(w8, lo), word_of(w0, lo + 1), word_of(w8, lo + 1),
             word_of(xv, lo), word_of(xv, lo + 1));
}

// Step j of a block, from the lane's whole 32 elements of rows g, g + 8 and token g.
__device__ __forceinline__ void bf16_order_step(float (&c)[4], const uint4 (&w0)[4],
                                                const uint4 (&w8)[4], const uint4 (&xv)[4],
                                                int j) {
    bf16_order_mma(c, w0[j >> 1], w8[j >> 1], xv[j >> 1], j & 1);
}
