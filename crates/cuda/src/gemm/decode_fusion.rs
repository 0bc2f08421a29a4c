//! One-token decode steps (batch 1) through the fused GEMVs (kernels/gemv_fused.cu), where
//! they apply: a layer then launches five kernels instead of nine. Each method launches its
//! fused kernel and returns `Ok(true)`, or launches nothing and returns `Ok(false)` for the
//! caller to run the unfused kernels: for more than one token, with batch invariance on
//! (whose products are other kernels), for a layer not made of one bf16 matrix, or for a
//! hidden size the kernels do not take.
//!
//! The fused kernels give the unfused ones' bits (the same sums in the same order), so the
//! level only changes speed: `FERRITE_DECODE_FUSION` 0 fuses nothing, 1 the residual adds, 2
//! also the MLP's norm and activation, 3 (the default) also the attention's norm, RoPE and
//! K/V write, so that each fusion can be timed on its own.

use ferrite_model::config::Activation;

use super::Gemm;
use crate::device_ptr::DevicePtr;
use crate::kernels::{Kernels, LinearArgs, NormedInput, RopeKvArgs, FUSED_MAX_HIDDEN};
use crate::linear::Linear;

/// How much of a one-token step goes through the fused kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DecodeFusion {
    Off = 0,
    ResidualAdd = 1,
    Mlp = 2,
    All = 3,
}

impl DecodeFusion {
    /// `FERRITE_DECODE_FUSION` (0..=3), default [`DecodeFusion::All`].
    pub fn from_env() -> DecodeFusion {
        match std::env::var("FERRITE_DECODE_FUSION").as_deref() {
            Ok("0") => DecodeFusion::Off,
            Ok("1") => DecodeFusion::ResidualAdd,
            Ok("2") => DecodeFusion::Mlp,
            _ => DecodeFusion::All,
        }
    }
}

impl Gemm {
    /// The bf16 weight of `lin` when a fused kernel at `level` runs it for `n` tokens.
    fn fused_weight(&self, level: DecodeFusion, lin: &Linear, n: usize) -> Option<DevicePtr> {
        let runs = n == 1
            && n <= self.gemv_max_tokens
            && !self.batch_invariant
            && self.fusion >= level
            && lin.parts.len() == 1
            && lin.k.is_multiple_of(8);
        runs.then(|| lin.parts[0].matrix.bf16_data()).flatten()
    }

    /// y[0] += x W^T through the fused GEMV (see the module doc for when it runs).
    pub(super) fn fused_add(
        &self,
        kernels: &Kernels,
        x: DevicePtr,
        lin: &Linear,
        y: DevicePtr,
        n: usize,
    ) -> anyhow::Result<bool> {
        let Some(w) = self.fused_weight(DecodeFusion::ResidualAdd, lin, n) else {
            return Ok(false);
        };
        let args = LinearArgs {
            x,
            w,
            y,
            n,
            rows: lin.rows,
            k: lin.k,
            ldy: lin.rows,
        };
        kernels.gemv_add(&args)?;
        Ok(true)
    }

    /// out = act(gate) * up of rmsnorm(x) through `gate_up` (bf16 [n, inter]), in one kernel.
    pub fn norm_gated(
        &self,
        kernels: &Kernels,
        norm: &NormedInput,
        gate_up: &Linear,
        activation: Activation,
        out: DevicePtr,
        n: usize,
    ) -> anyhow::Result<bool> {
        match self.fused_weight(DecodeFusion::Mlp, gate_up, n) {
            Some(w) if fits(norm, gate_up) => {
                kernels.gemv_norm_gated(norm, w, gate_up.rows / 2, activation, out)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// rmsnorm(x) through `wqkv`, then bias, RoPE and the K/V write (`rope`), in one kernel.
    pub fn norm_rope(
        &self,
        kernels: &Kernels,
        norm: &NormedInput,
        wqkv: &Linear,
        rope: &RopeKvArgs,
    ) -> anyhow::Result<bool> {
        match self.fused_weight(DecodeFusion::All, wqkv, rope.n) {
            Some(w) if fits(norm, wqkv) => {
                kernels.gemv_norm_rope(norm, w, rope)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

/// Whether the fused kernels' shared row holds the normalised input of `lin`.
fn fits(norm: &NormedInput, lin: &Linear) -> bool {
    lin.k == norm.hidden && norm.hidden <= FUSED_MAX_HIDDEN && norm.hidden.is_multiple_of(8)
}
