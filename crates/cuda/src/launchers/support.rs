//! Which models the kernels can run: checked when the backend is created, so that an
//! unsupported shape fails there with a message instead of in a kernel.

use ferrite_model::config::{Activation, ModelConfig};

use super::attention::{HEAD_DIMS, MAX_GROUP};
use super::moe::{MOE_MAX_EXPERTS, MOE_MAX_K};

/// The model's attention geometry has kernels (head size, query group) and its hidden and
/// intermediate sizes suit the kernels' vector loads (up to 8 bf16 at a time).
pub fn check_supported(c: &ModelConfig) -> anyhow::Result<()> {
    c.check_shape()?;
    if let Some(moe) = &c.moe {
        anyhow::ensure!(
            moe.num_experts <= MOE_MAX_EXPERTS,
            "the CUDA routing kernel takes at most {MOE_MAX_EXPERTS} experts, not {}",
            moe.num_experts
        );
        anyhow::ensure!(
            (1..=MOE_MAX_K.min(moe.num_experts)).contains(&moe.experts_per_token),
            "the CUDA routing kernel routes a token to 1..={MOE_MAX_K} experts, not {}",
            moe.experts_per_token
        );
        anyhow::ensure!(
            c.block.activation == Activation::Silu,
            "the CUDA expert kernels apply SwiGLU; {:?} experts are not supported",
            c.block.activation
        );
        let shared = moe.shared_expert_intermediate_size.unwrap_or(8);
        anyhow::ensure!(
            moe.expert_intermediate_size.is_multiple_of(8) && shared.is_multiple_of(8),
            "expert widths must be multiples of 8 (experts {}, shared {shared})",
            moe.expert_intermediate_size
        );
    }
    anyhow::ensure!(
        HEAD_DIMS.contains(&c.head_dim),
        "the CUDA kernels support head_dim {HEAD_DIMS:?}, not {}",
        c.head_dim
    );
    let group = c.num_heads / c.num_kv_heads;
    anyhow::ensure!(
        group <= MAX_GROUP,
        "query group {group} > {MAX_GROUP} is not supported"
    );
    // The per-head Q/K norm runs before the kernel that adds the QKV bias; no architecture
    // has both.
    anyhow::ensure!(
        !(c.block.qk_norm && c.qkv_bias),
        "Q/K norm together with a QKV bias is not supported by the CUDA backend"
    );
    anyhow::ensure!(
        c.hidden_size.is_multiple_of(8) && c.intermediate_size.is_multiple_of(8),
        "hidden ({}) and intermediate ({}) sizes must be multiples of 8",
        c.hidden_size,
        c.intermediate_size
    );
    Ok(())
}
