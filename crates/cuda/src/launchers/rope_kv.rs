//! Launcher of kernels/rope_kv.cu: QKV bias, rotary embedding, and the K/V write into the
//! paged cache, in one kernel.

use super::attention::AttentionDims;
use super::launch::{Args, Kernels, Shape};
use crate::device_ptr::DevicePtr;

/// Arguments of [`Kernels::rope_kv_write`].
#[derive(Debug, Clone, Copy)]
pub struct RopeKvArgs {
    pub dims: AttentionDims,
    /// [n, q_dim + 2 kv_dim]: the QKV projection's output, f32 (or bf16 when `qkv_bf16`).
    pub qkv: DevicePtr,
    pub qkv_bf16: bool,
    /// f32 [q_dim + 2 kv_dim]; `None` without QKV bias.
    pub bias: Option<DevicePtr>,
    /// i32 [n] token positions.
    pub positions: DevicePtr,
    /// i32 [n] KV slots (page * page_size + offset); -1 writes nothing.
    pub slots: DevicePtr,
    /// f32 [head_dim / 2] RoPE inverse frequencies.
    pub inv_freq: DevicePtr,
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
        // rope_kv_write(qkv, bias, positions, slots, inv_freq, q_out, k_cache, v_cache,
        //               num_heads, num_kv_heads, head_dim, page_size, interleaved)
        let args = Args::new()
            .ptr(a.qkv)
            .nullable_ptr(a.bias)
            .ptr(a.positions)
            .ptr(a.slots)
            .ptr(a.inv_freq)
            .ptr(a.q_out)
            .ptr(a.k_cache)
            .ptr(a.v_cache)
            .usize(d.num_heads)
            .usize(d.num_kv_heads)
            .usize(d.head_dim)
            .usize(a.page_size)
            .i32(a.interleaved as i32);
        anyhow::ensure!(
            d.head_dim.is_multiple_of(4),
            "RoPE needs head_dim % 4 == 0, not {}",
            d.head_dim
        );
        // Threads: one per two rotated pairs, one per four V elements.
        let work =
            (d.num_heads + d.num_kv_heads) * d.head_dim / 4 + d.num_kv_heads * d.head_dim / 4;
        let shape = Shape {
            grid: (a.n as u32, work.div_ceil(128) as u32, 1),
            block: 128,
        };
        let name = if a.qkv_bf16 {
            "rope_kv_write_bf16"
        } else {
            "rope_kv_write"
        };
        self.launch(name, shape, args)
    }
}
