// Quantized expert weights decoded to bf16 in registers, 32 consecutive weights ("a piece":
// elements 32 p .. 32 p + 31 of a row) at a time, for the expert products (moe_experts.cu,
// moe_tile.cu), which multiply bf16 on the tensor cores. A weight is the host dequantizer's f32
// (quant.cuh's `group`, QUANT_EXACT_ROUNDING) rounded to bf16 to nearest: what the loader stores
// when it widens a quantized stack to bf16, so the products over the quantized stacks equal the
// products over the widened ones bit for bit, at a quarter to a half of the memory.
//
// A format's piece reader has
//   Raw                        a piece's raw words in registers (and whether it exists)
//   at_row(planes, row, k)     the planes moved to row `row` of a [rows, k] matrix
//   load(raw, planes, p, ok)   piece p of that row (zeros when !ok)
//   words(raw, out[4])         the piece's 32 bf16 values, 8 to a 16-byte word
#pragma once
#ifndef QUANT_EXACT_ROUNDING
#error "quant_pieces.cuh decodes as the host does: define QUANT_EXACT_ROUNDING before it"
#endif
#include "quant.cuh"

// The formats whose pieces fall inside one unit of quant.cuh (Q8_0: the whole 32-element
// block; Q4_K, Q5_K: a 64-element unit holds two pieces, the low and the high nibbles):
// groups 4 (p % 2) .. + 3 of unit p / 2 for those, groups 0..3 for Q8_0. P0 and P1 are the
// bytes a block takes in each plane (crates/cuda/src/quant.rs cuts them).
template <class Q, int P0, int P1>
struct UnitPieces {
    static_assert(Q::BLOCK / Q::UNITS == 32 || Q::BLOCK / Q::UNITS == 64, "unit of 32 or 64");
    static constexpr int PIECES_PER_UNIT = Q::BLOCK / Q::UNITS / 32;
    struct Raw {
        typename Q::Unit u;
        int part, high;  // the unit; the high nibbles (its second piece) or the low ones
        bool ok;         // false past the row: zeros
    };
    static __device__ __forceinline__ Planes at_row(const Planes& p, i64 row, int k) {
        const i64 blocks = row * (k / Q::BLOCK);
        return {p.p0 + blocks * P0, P1 ? p.p1 + blocks * P1 : nullptr, nullptr};
    }
    static __device__ __forceinline__ void load(Raw& raw, const Planes& p, int piece, bool ok) {
        const int per_block = Q::BLOCK / 32;
        const int in_block = piece % per_block;
        raw.part = in_block / PIECES_PER_UNIT;
        raw.high = in_block % PIECES_PER_UNIT;
        raw.ok = ok;
        raw.u = Q::load(p, ok ? piece / per_block : 0, raw.part);
    }
    static __device__ __forceinline__ void words(const Raw& raw, uint4 (&out)[4]) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            float w[8];
            // Group i of the piece, written so that the compiler sees g % 4 == i: the group's
            // word of the unit is then picked at compile time, not through local memory.
            Q::group(raw.u, raw.part, (raw.high << 2) | i, w);
            out[i] = raw.ok ? pack8(w) : make_uint4(0, 0, 0, 0);
        }
    }
};

// Q6_K's pieces: piece p of a block is run r = p % 4 of half h = p / 4 (quant.cuh's Q6_K):
// element l < 32 takes the low (r < 2) or high nibble of ql[64 h + 32 (r & 1) + l], bits 2r,
// 2r + 1 of qh[32 h + l], scale sc[8 h + 2 r + l / 16]. Its words straddle two of quant.cuh's
// units, so it reads its own.
struct Q6KPieces {
    struct Raw {
        uint4 ql0, ql1, qh0, qh1;
        u32 scales;  // the scale word holding sc[8 h + 2 r] and sc[8 h + 2 r + 1]
        float d;
        int r;       // r < 0: past the row, zeros
    };
    static __device__ __forceinline__ Planes at_row(const Planes& p, i64 row, int k) {
        return {p.p0 + row * (k / 256) * 208, p.p1 + row * (k / 256) * 2, nullptr};
    }
    static __device__ __forceinline__ void load(Raw& raw, const Planes& p, int piece, bool ok) {
        const int block = ok ? piece / 8 : 0, h = (piece / 4) & 1, r = piece & 3;
        const uint4* blk = reinterpret_cast<const uint4*>(p.p0 + (i64)block * 208);
        raw.ql0 = blk[4 * h + 2 * (r & 1)];
        raw.ql1 = blk[4 * h + 2 * (r & 1) + 1];
        raw.qh0 = blk[8 + 2 * h];
        raw.qh1 = blk[8 + 2 * h + 1];
        raw.scales = reinterpret_cast<const u32*>(p.p0 + (i64)block * 208 + 192)[2 * h + r / 2];
        raw.d = half_at(p.p1, block);
        raw.r = ok ? r : -1;
    }
    static __device__ __forceinline__ void words(const Raw& raw, uint4 (&out)[4]) {
        const int r = raw.r & 3, shift = 4 * (r >> 1);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            // Elements 8 i .. 8 i + 7: scale sc[8 h + 2 r + i / 2], as quant.cuh's Q6_K::group.
            const int sc = (int)(signed char)((raw.scales >> (8 * (2 * (r & 1) + i / 2))) & 0xffu);
            const float dsc = dq_mul(raw.d, (float)sc);
            const uint4& ql = i < 2 ? raw.ql0 : raw.ql1;
            const uint4& qh = i < 2 ? raw.qh0 : raw.qh1;
            float w[8];
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const int l = 8 * (i & 1) + j;
                const u32 lo = (byte_of(ql, l) >> shift) & 0xf;
                const u32 hi = (byte_of(qh, l) >> (2 * r)) & 3u;
                w[j] = dq_mul(dsc, qf(lo | (hi << 4)) - 32.0f);
            }
            out[i] = raw.r < 0 ? make_uint4(0, 0, 0, 0) : pack8(w);
        }
    }
};

// The piece readers by format.
using Q8_0Pieces = UnitPieces<Q8_0, 2, 32>;
using Q4KPieces = UnitPieces<Q4_K, 144, 0>;
using Q5KPieces = UnitPieces<Q5_K, 176, 0>;
