// Gated DeltaNet linear attention (qwen3_5, qwen3_next; ferrite_model::plan::LinearAttentionSpec
// has the math), over a step's sequences. Each sequence has a recurrent-state slot:
//   [conv state: (K - 1) x C f32, oldest first][S: value_heads x key_head_dim x value_head_dim f32]
// per linear layer, `layer_offset` floats into the slot, slots `slot_stride` floats apart.
// Per sequence (batch order, then the padding of a captured decode graph): its first token row,
// its token count, its slot (-1: padding, nothing to do) and whether it starts at position 0
// (its state then starts from zero instead of the slot's contents).
#include "common.cuh"

// grid = (ceil(C / 128), sequences, tiles), block = 128: one thread per channel runs a tile
// of GDN_CONV_TILE tokens of a sequence in order with the last K - 1 inputs in registers
// (read from the rows before the tile, or from the slot's state before the sequence's first
// token) and writes each output (SiLU of the causal depthwise convolution). A sequence of one
// tile leaves its newest K - 1 inputs in the slot here; a longer one's are saved by
// gdn_conv_save afterwards, since its first tile reads the slot's old ones.
// `mixed` rows are `ld` floats apart; the convolved channels are its first C columns.
#define GDN_MAX_TAPS 8
#define GDN_CONV_TILE 64
extern "C" __global__ void gdn_conv(const float* __restrict__ mixed, int ld,
                                    const float* __restrict__ taps, float* __restrict__ state,
                                    const i32* __restrict__ seq_row, const i32* __restrict__ seq_len,
                                    const i32* __restrict__ seq_slot,
                                    const i32* __restrict__ seq_fresh, i64 slot_stride,
                                    i64 layer_offset, float* __restrict__ out, int channels,
                                    int num_taps) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int s = blockIdx.y;
    const int t_begin = blockIdx.z * GDN_CONV_TILE;
    const int slot = seq_slot[s], row0 = seq_row[s], len = seq_len[s];
    const bool fresh = seq_fresh[s] != 0;
    float w[GDN_MAX_TAPS];
    if (c < channels) {
#pragma unroll
        for (int j = 0; j < GDN_MAX_TAPS; ++j) w[j] = j < num_taps ? taps[(i64)c * num_taps + j] : 0.0f;
    }
    pdl_enter();
    if (c >= channels || slot < 0 || t_begin >= len) return;
    const int t_end = min(len, t_begin + GDN_CONV_TILE);
    float* conv_state = state + (i64)slot * slot_stride + layer_offset;
    // window[j]: input j steps before the current one's oldest tap (window[kernel - 2] newest),
    // i.e. the input at token t_begin - (K - 1) + j, from the slot when before the sequence.
    float window[GDN_MAX_TAPS];
#pragma unroll
    for (int j = 0; j < GDN_MAX_TAPS - 1; ++j) {
        const int t = t_begin - (num_taps - 1) + j;
        float x = 0.0f;
        if (j < num_taps - 1) {
            if (t >= 0) x = mixed[(i64)(row0 + t) * ld + c];
            else if (!fresh) x = conv_state[(i64)(t + num_taps - 1) * channels + c];
        }
        window[j] = x;
    }
    for (int t = t_begin; t < t_end; ++t) {
        const float x = mixed[(i64)(row0 + t) * ld + c];
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < GDN_MAX_TAPS - 1; ++j)
            if (j < num_taps - 1) sum += w[j] * window[j];
        sum += w[num_taps - 1] * x;
        out[(i64)(row0 + t) * channels + c] = sum / (1.0f + __expf(-sum));
#pragma unroll
        for (int j = 0; j < GDN_MAX_TAPS - 2; ++j)
            if (j < num_taps - 2) window[j] = window[j + 1];
        if (num_taps >= 2) window[num_taps - 2] = x;
    }
    if (len > GDN_CONV_TILE) return;
#pragma unroll
    for (int j = 0; j < GDN_MAX_TAPS - 1; ++j)
        if (j < num_taps - 1) conv_state[(i64)j * channels + c] = window[j];
}

// The newest K - 1 inputs of each sequence longer than one tile into its slot's convolution
// state (after gdn_conv, which read the old ones). grid = (ceil(C / 128), sequences),
// block = 128.
extern "C" __global__ void gdn_conv_save(const float* __restrict__ mixed, int ld,
                                         float* __restrict__ state,
                                         const i32* __restrict__ seq_row,
                                         const i32* __restrict__ seq_len,
                                         const i32* __restrict__ seq_slot, i64 slot_stride,
                                         i64 layer_offset, int channels, int num_taps) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int s = blockIdx.y;
    const int slot = seq_slot[s], row0 = seq_row[s], len = seq_len[s];
    pdl_enter();
    if (c >= channels || slot < 0 || len <= GDN_CONV_TILE) return;
    float* conv_state = state + (i64)slot * slot_stride + layer_offset;
    for (int j = 0; j < num_taps - 1; ++j)
        conv_state[(i64)j * channels + c] =
            mixed[(i64)(row0 + len - (num_taps - 1) + j) * ld + c];
}

// grid = (value heads, sequences), block = parts x width threads, width = value_head_dim
// rounded up to whole warps (<= 256; threads past value_head_dim only join the block's sums),
// parts = blockDim / width (4 for heads of <= 128 values, else 2; launchers'
// recurrence_block). Thread (p, j) keeps rows p * rows .. (p + 1) * rows of column j of the
// head's state S (rows = ceil(dk / parts) <= GDN_MAX_PART_ROWS) in registers across the
// sequence's tokens: a decode step
// reads each slot's state once, and splitting the rows over parts puts 4x the loads in
// flight on an SM than one thread per column did (measured: 20.6 us a 27B layer at batch 1
// with one thread per column). Per token: q and k of the head's key head L2-normalised (q also
// divided by sqrt(dk)), g = A * softplus(alpha + dt_bias), beta = sigmoid(b); S = exp(g) S;
// S += k (beta (v - S^T k))^T; o = S^T q (each column's sums over rows: per part in row
// order, then the parts in order, the same for every batch); then the gated RMSNorm of o over
// the head, times norm_w, times silu(z), into out [n, value_dim] as bf16 (the output
// projection's input).
// `conv` rows: q (key_dim) | k (key_dim) | v (value_dim); `mixed` rows (ld floats apart)
// hold z at column z_col (value_dim), b at b_col and a at a_col (value heads each).
#define GDN_MAX_DK 128
#define GDN_MAX_PART_ROWS (GDN_MAX_DK / 4)
#define GDN_PART_SUMS 512
extern "C" __global__ void __launch_bounds__(GDN_PART_SUMS) gdn_recurrence(
    const float* __restrict__ conv, const float* __restrict__ mixed, int ld, int z_col,
    int b_col, int a_col, const float* __restrict__ decay_rate, const float* __restrict__ dt_bias,
    const float* __restrict__ norm_w, float* __restrict__ state, const i32* __restrict__ seq_row,
    const i32* __restrict__ seq_len, const i32* __restrict__ seq_slot,
    const i32* __restrict__ seq_fresh, i64 slot_stride, i64 layer_offset, bf16* __restrict__ out,
    int key_heads, int value_heads, int dk, int dv, int tiled, float eps, int tokenwise_max_len) {
    __shared__ float qk[2 * GDN_MAX_DK];
    __shared__ float scratch[32];
    // part_sum[p * width + j]: part p's share of column j's sum.
    __shared__ float part_sum[GDN_PART_SUMS];
    const int h = blockIdx.x, s = blockIdx.y;
    const int width = (dv + 31) & ~31, parts = blockDim.x / width;
    const int j = threadIdx.x % width, p = threadIdx.x / width;
    const int rows = (dk + parts - 1) / parts, i0 = p * rows;
    const int slot = seq_slot[s], row0 = seq_row[s], len = seq_len[s];
    const bool fresh = seq_fresh[s] != 0;
    const int key_dim = key_heads * dk, value_dim = value_heads * dv;
    const int channels = 2 * key_dim + value_dim;
    // Value head h reads key head h / (value_heads / key_heads), or h % key_heads when the
    // file holds the value heads in llama.cpp's tiled order.
    const int kh = tiled ? h % key_heads : h / (value_heads / key_heads);
    const bool active = j < dv;
    const float a_h = decay_rate[h], dt_h = dt_bias[h], w_j = active ? norm_w[j] : 0.0f;
    const float q_scale = rsqrtf((float)dk);
    pdl_enter();
    // Longer sequences are gdn_chunked's.
    if (slot < 0 || len > tokenwise_max_len) return;
    float* S = state + (i64)slot * slot_stride + layer_offset + (i64)h * dk * dv;
    float col[GDN_MAX_PART_ROWS];
#pragma unroll
    for (int r = 0; r < GDN_MAX_PART_ROWS; ++r) {
        const int i = i0 + r;
        col[r] = (r < rows && i < dk && !fresh && active) ? S[(i64)i * dv + j] : 0.0f;
    }
    for (int t = 0; t < len; ++t) {
        const i64 r = row0 + t;
        const float* crow = conv + r * channels;
        // q and k of key head kh into shared memory, with their squared norms.
        float q_sq = 0.0f, k_sq = 0.0f;
        for (int i = threadIdx.x; i < dk; i += blockDim.x) {
            const float qi = crow[kh * dk + i], ki = crow[key_dim + kh * dk + i];
            qk[i] = qi;
            qk[GDN_MAX_DK + i] = ki;
            q_sq += qi * qi;
            k_sq += ki * ki;
        }
        q_sq = block_sum(q_sq, scratch);
        k_sq = block_sum(k_sq, scratch);
        const float q_norm = rsqrtf(q_sq + 1e-6f), k_norm = rsqrtf(k_sq + 1e-6f);
        const float* mrow = mixed + r * ld;
        const float b = mrow[b_col + h], a = mrow[a_col + h];
        const float beta = 1.0f / (1.0f + __expf(-b));
        const float x = a + dt_h;
        const float softplus = x > 20.0f ? x : log1pf(__expf(x));
        const float decay = __expf(a_h * softplus);
        const float v = active ? crow[2 * key_dim + h * dv + j] : 0.0f;
        float kv_part = 0.0f;
#pragma unroll
        for (int q = 0; q < GDN_MAX_PART_ROWS; ++q) {
            const int i = i0 + q;
            if (q < rows && i < dk) {
                col[q] *= decay;
                kv_part += col[q] * (qk[GDN_MAX_DK + i] * k_norm);
            }
        }
        part_sum[p * width + j] = kv_part;
        __syncthreads();
        float kv_mem = 0.0f;
        for (int q = 0; q < parts; ++q) kv_mem += part_sum[q * width + j];
        __syncthreads();
        const float delta = (v - kv_mem) * beta;
        float o_part = 0.0f;
#pragma unroll
        for (int q = 0; q < GDN_MAX_PART_ROWS; ++q) {
            const int i = i0 + q;
            if (q < rows && i < dk) {
                col[q] += (qk[GDN_MAX_DK + i] * k_norm) * delta;
                o_part += col[q] * (qk[i] * q_norm * q_scale);
            }
        }
        part_sum[p * width + j] = o_part;
        __syncthreads();
        float o = 0.0f;
        for (int q = 0; q < parts; ++q) o += part_sum[q * width + j];
        // The gated RMSNorm over the head's dv outputs (part 0 of each column counts it; the
        // sum's barriers also keep part_sum until every thread has read it).
        const float mean_sq = block_sum(p == 0 ? o * o : 0.0f, scratch) / (float)dv;
        if (active && p == 0) {
            const float z = mrow[z_col + h * dv + j];
            const float gate = z / (1.0f + __expf(-z));
            out[r * value_dim + h * dv + j] =
                __float2bfloat16(w_j * (o * rsqrtf(mean_sq + eps)) * gate);
        }
    }
    if (!active) return;
#pragma unroll
    for (int q = 0; q < GDN_MAX_PART_ROWS; ++q) {
        const int i = i0 + q;
        if (q < rows && i < dk) S[(i64)i * dv + j] = col[q];
    }
}

// out[t][i] (bf16) *= sigmoid(gate_rows[t * ld + i]) (f32) for the tokens of `width` elements:
// gated attention's output gate, read from the fused QKV rows. grid = (n, ceil(width / 256)),
// block = 256.
extern "C" __global__ void sigmoid_gate_mul(bf16* __restrict__ out,
                                            const float* __restrict__ gate_rows, int ld,
                                            int width) {
    const int t = blockIdx.x, i = blockIdx.y * blockDim.x + threadIdx.x;
    pdl_enter();
    if (i >= width) return;
    const float g = gate_rows[(i64)t * ld + i];
    const i64 at = (i64)t * width + i;
    out[at] = __float2bfloat16(__bfloat162float(out[at]) * (1.0f / (1.0f + __expf(-g))));
}
