//! Launcher of kernels/rope_kv.cu: QKV bias, rotary embedding, and the K/V write into the
//! paged cache, in one kernel.

use super::attention::AttentionDims;
use super::launch::{Kernels, Shape};
use super::signatures::RopeKvWrite;
use crate::device_ptr::DevicePtr;

/// Arguments of [`Kernels::rope_kv_write`].
#[derive(Debug, Clone, Copy)]
pub struct RopeKvArgs {
    pub dims: AttentionDims,
    /// [n, row_stride]: the QKV projection's output (q_dim + 2 kv_dim, then gated attention's
    /// gate), f32 (or bf16 when `qkv_bf16`).
    pub qkv: DevicePtr,
    pub row_stride: usize,
    pub qkv_bf16: bool,
    /// f32 [q_dim + 2 kv_dim]; `None` without QKV bias.
    pub bias: Option<DevicePtr>,
    /// i32 [n] token positions.
    pub positions: DevicePtr,
    /// i32 [n] KV slots (page * page_size + offset); -1 writes nothing.
    pub slots: DevicePtr,
    /// f32 [rotary_dim / 2] RoPE inverse frequencies.
    pub inv_freq: DevicePtr,
    /// Dims of each head RoPE turns (head_dim but with a partial rotary factor).
    pub rotary_dim: usize,
    /// bf16 [n, q_dim]: the rotated queries.
    pub q_out: DevicePtr,
    pub k_cache: DevicePtr,
    pub v_cache: DevicePtr,
    pub page_size: usize,
    /// Rotate pairs (2i, 2i + 1) instead of (i, i + head_dim / 2).
    pub interleaved: bool,
    /// Tokens.
    pub n: usize,
}

impl Kernels {
    pub fn rope_kv_write(&self, a: &RopeKvArgs) -> anyhow::Result<()> {
        let d = a.dims;
        anyhow::ensure!(
            d.head_dim.is_multiple_of(4)
                && a.rotary_dim.is_multiple_of(4)
                && a.rotary_dim <= d.head_dim,
            "RoPE needs head_dim % 4 == 0 and rotary_dim % 4 == 0, not {} and {}",
            d.head_dim,
            a.rotary_dim
        );
        // Threads: one per two rotated pairs, per two passed-through dims, per four V elements.
        let heads = d.num_heads + d.num_kv_heads;
        let work = heads * a.rotary_dim / 4
            + heads * (d.head_dim - a.rotary_dim) / 2
            + d.num_kv_heads * d.head_dim / 4;
        let shape = Shape {
            grid: (a.n as u32, work.div_ceil(128) as u32, 1),
            block: 128,
        };
        let params = RopeKvWrite {
            kernel: if a.qkv_bf16 {
                RopeKvWrite::QKV_BF16
            } else {
                RopeKvWrite::QKV_F32
            },
            qkv: a.qkv,
            bias: a.bias,
            positions: a.positions,
            slots: a.slots,
            inv_freq: a.inv_freq,
            q_out: a.q_out,
            k_cache: a.k_cache,
            v_cache: a.v_cache,
            num_heads: d.num_heads,
            num_kv_heads: d.num_kv_heads,
            head_dim: d.head_dim,
            rotary_dim: a.rotary_dim,
            row_stride: a.row_stride,
            page_size: a.page_size,
            interleaved: i32::from(a.interleaved),
        };
        self.launch(shape, &params)
    }
}
