// An EAGLE-3 draft head's kernels (ferrite_model::plan::Eagle3Spec has the math): the target's
// layer inputs captured during its step, the head's input rows, and its draft-vocabulary
// logits spread over the target's vocabulary.
#include "common.cuh"

// grid = rows, block = 256: out[r * ld + col + c] = bf16(x[r * hidden + c]). The input of one
// of the target's auxiliary layers into its third of `fc`'s input rows (ld = 3 hidden).
extern "C" __global__ void capture_rows(const float* __restrict__ x, bf16* __restrict__ out,
                                        int hidden, int ld, int col) {
    const i64 r = blockIdx.x;
    pdl_enter();
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
        out[r * ld + col + c] = __float2bfloat16(x[r * hidden + c]);
    }
}

// grid = pairs, block = 256. Pair r: its token's embedding emb[r] (f32) and its hidden row g:
// row src[r] of step_rows when src[r] >= 0 (fc of the target's layer inputs), else kept row
// ring[-1 - src[r]] (a kept target row, or the head's own output of its last draft step).
//   out[r]   = bf16([input_norm(emb[r]); hidden_norm(g)]), [2 hidden] a row: what Q, K, V read;
//   resid[r] = g, or hidden_norm(g) when residual_normed: the layer's residual stream.
extern "C" __global__ void eagle3_input(const float* __restrict__ emb,
                                        const float* __restrict__ step_rows,
                                        const float* __restrict__ ring, const i32* __restrict__ src,
                                        const float* __restrict__ input_norm_w,
                                        const float* __restrict__ hidden_norm_w,
                                        bf16* __restrict__ out, float* __restrict__ resid,
                                        int hidden, float eps, int residual_normed) {
    __shared__ float scratch[32];
    const int r = blockIdx.x;
    const int from = src[r];
    pdl_enter();
    const float* e = emb + (i64)r * hidden;
    const float* g = from >= 0 ? step_rows + (i64)from * hidden : ring + (i64)(-1 - from) * hidden;
    bf16* o = out + (i64)r * 2 * hidden;
    float* x = resid + (i64)r * hidden;
    float e_sq = 0.0f, g_sq = 0.0f;
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
        e_sq += e[c] * e[c];
        g_sq += g[c] * g[c];
    }
    const float e_inv = rsqrtf(block_sum(e_sq, scratch) / (float)hidden + eps);
    const float g_inv = rsqrtf(block_sum(g_sq, scratch) / (float)hidden + eps);
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
        const float normed = g[c] * g_inv * hidden_norm_w[c];
        o[c] = __float2bfloat16(e[c] * e_inv * input_norm_w[c]);
        o[hidden + c] = __float2bfloat16(normed);
        x[c] = residual_normed ? normed : g[c];
    }
}

// grid = rows, block = 256: row r of `logits` ([vocab] f32) is -inf except at the target ids
// of the draft vocabulary: logits[r][d2t[i]] = draft[r][i] (ids at or past `vocab` skipped).
extern "C" __global__ void scatter_draft_logits(const float* __restrict__ draft,
                                                const i32* __restrict__ d2t,
                                                float* __restrict__ logits, int draft_vocab,
                                                int vocab) {
    const i64 r = blockIdx.x;
    pdl_enter();
    float* row = logits + r * vocab;
    for (int j = threadIdx.x; j < vocab; j += blockDim.x) row[j] = NEG_INF;
    __syncthreads();
    const float* d = draft + r * draft_vocab;
    for (int i = threadIdx.x; i < draft_vocab; i += blockDim.x) {
        const int id = d2t[i];
        if (id >= 0 && id < vocab) row[id] = d[i];
    }
}
