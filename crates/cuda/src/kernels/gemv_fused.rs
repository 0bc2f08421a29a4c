//! Launchers of kernels/gemv_fused.cu: one-token GEMVs with the kernels around them folded in
//! (the residual add after the O and down projections; the norm before and the activation
//! after the gate/up projection; the norm before and the bias, RoPE and K/V write after the
//! QKV projection). Each computes the bits of the unfused kernels.

use ferrite_model::config::Activation;

use super::gemv::{gemv_split, LinearArgs};
use super::launch::{grid1, Args, Kernels};
use super::names::FUSED_GEMV_NAMES;
use super::rope_kv::RopeKvArgs;
use crate::device_ptr::DevicePtr;

/// Largest hidden size whose normalised row a fused GEMV keeps in shared memory.
pub const FUSED_MAX_HIDDEN: usize = 8192;

/// The RMSNorm a fused GEMV applies to token 0's row of the residual stream before its
/// product (what add_rmsnorm without a delta would write).
#[derive(Debug, Clone, Copy)]
pub struct NormedInput {
    /// f32 [hidden]: the residual row.
    pub x: DevicePtr,
    /// f32 [hidden].
    pub weight: DevicePtr,
    pub eps: f32,
    pub hidden: usize,
}

/// Index of a split (1, 4, 8) in the name tables.
fn split_index(rows: usize, k: usize) -> usize {
    match gemv_split(rows, k) {
        1 => 0,
        4 => 1,
        _ => 2,
    }
}

/// Blocks of 8 warps for `groups` groups of `split` warps.
fn blocks(groups: usize, rows: usize, k: usize) -> usize {
    groups.div_ceil(8 / gemv_split(rows, k))
}

impl NormedInput {
    fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.hidden <= FUSED_MAX_HIDDEN && self.hidden.is_multiple_of(8),
            "a fused GEMV normalises rows of at most {FUSED_MAX_HIDDEN} values, a multiple of 8, not {}",
            self.hidden
        );
        Ok(())
    }
}

impl Kernels {
    /// y[0, r] += (x W^T)[r] for one token (`a.n` 1): a projection adding itself to the
    /// residual stream `a.y`.
    pub fn gemv_add(&self, a: &LinearArgs) -> anyhow::Result<()> {
        anyhow::ensure!(a.n == 1, "the fused GEMVs take one token, not {}", a.n);
        anyhow::ensure!(a.k.is_multiple_of(8), "GEMV needs k % 8 == 0, not {}", a.k);
        // gemv_bf16_add_s<split>(w, x, y, rows, k, ldy)
        let args = Args::new()
            .ptr(a.w)
            .ptr(a.x)
            .ptr(a.y)
            .usize(a.rows)
            .usize(a.k)
            .usize(a.ldy);
        let name = FUSED_GEMV_NAMES[0][split_index(a.rows, a.k)];
        self.launch(name, grid1(blocks(a.rows, a.rows, a.k), 256), args)
    }

    /// out[j] = bf16(act(g_j) * u_j) for one token, (g | u) = rmsnorm(x) W^T with `w`
    /// [2 inter, hidden] (gate rows, then up rows).
    pub fn gemv_norm_gated(
        &self,
        norm: &NormedInput,
        w: DevicePtr,
        inter: usize,
        activation: Activation,
        out: DevicePtr,
    ) -> anyhow::Result<()> {
        norm.check()?;
        let (rows, k) = (2 * inter, norm.hidden);
        let table = match activation {
            Activation::Silu => 1,
            Activation::GeluTanh => 2,
        };
        // gemv_norm_<act>_s<split>(w, x, norm_weight, eps, hidden, inter, out)
        let args = Args::new()
            .ptr(w)
            .ptr(norm.x)
            .ptr(norm.weight)
            .f32(norm.eps)
            .usize(k)
            .usize(inter)
            .ptr(out);
        let name = FUSED_GEMV_NAMES[table][split_index(rows, k)];
        self.launch(name, grid1(blocks(inter, rows, k), 256), args)
    }

    /// For one token: qkv = rmsnorm(x) W^T, then what [`Kernels::rope_kv_write`] does with
    /// it (`rope.qkv` and `rope.qkv_bf16` unused).
    pub fn gemv_norm_rope(
        &self,
        norm: &NormedInput,
        w: DevicePtr,
        rope: &RopeKvArgs,
    ) -> anyhow::Result<()> {
        norm.check()?;
        anyhow::ensure!(
            rope.n == 1,
            "the fused GEMVs take one token, not {}",
            rope.n
        );
        let d = rope.dims;
        anyhow::ensure!(
            d.head_dim.is_multiple_of(2),
            "RoPE needs an even head_dim, not {}",
            d.head_dim
        );
        let kv_dim = d.num_kv_heads * d.head_dim;
        let (rows, k) = (d.num_heads * d.head_dim + 2 * kv_dim, norm.hidden);
        // One group per pair of rows: rotated pairs of Q and K heads, then V two by two.
        let groups = rows / 2;
        // gemv_norm_rope_s<split>(w, x, norm_weight, eps, hidden, bias, positions, slots,
        //   inv_freq, q_out, k_cache, v_cache, num_heads, num_kv_heads, head_dim, page_size,
        //   interleaved)
        let args = Args::new()
            .ptr(w)
            .ptr(norm.x)
            .ptr(norm.weight)
            .f32(norm.eps)
            .usize(k)
            .nullable_ptr(rope.bias)
            .ptr(rope.positions)
            .ptr(rope.slots)
            .ptr(rope.inv_freq)
            .ptr(rope.q_out)
            .ptr(rope.k_cache)
            .ptr(rope.v_cache)
            .usize(d.num_heads)
            .usize(d.num_kv_heads)
            .usize(d.head_dim)
            .usize(rope.page_size)
            .i32(rope.interleaved as i32);
        let name = FUSED_GEMV_NAMES[3][split_index(rows, k)];
        self.launch(name, grid1(blocks(groups, rows, k), 256), args)
    }
}
