//! Which models the kernels can run: checked when the backend is created, so that an
//! unsupported layer fails there with a message instead of in a kernel. The one capability
//! check of this backend: it matches every variant of the layer plan.

use ferrite_model::config::{Activation, MoeConfig};
use ferrite_model::plan::{AttentionSpec, LinearAttentionSpec, Mixer, MlpSpec, ModelPlan};

use super::attention::{HEAD_DIMS, MAX_GROUP};
use super::gated_deltanet::{recurrence_block, GDN_MAX_DK, GDN_MAX_DV, GDN_MAX_TAPS};
use super::moe::{MOE_MAX_EXPERTS, MOE_MAX_K};

/// Every layer of `plan` has kernels here: attention geometry (head size, query group), an
/// MLP the expert kernels take, widths that suit the kernels' vector loads (up to 8 bf16 at a
/// time). The plan has passed the shape checks every backend makes.
pub fn supports(plan: &ModelPlan) -> anyhow::Result<()> {
    anyhow::ensure!(
        plan.hidden_size.is_multiple_of(8),
        "the hidden size ({}) must be a multiple of 8",
        plan.hidden_size
    );
    // Gemma 4's model-level features (issue 38): no kernels here yet.
    anyhow::ensure!(
        plan.per_layer_input.is_none(),
        "per-layer inputs (Gemma 4) are not implemented on the CUDA backend"
    );
    anyhow::ensure!(
        plan.final_logit_softcap.is_none(),
        "final logit softcapping (Gemma 4) is not implemented on the CUDA backend"
    );
    for layer in &plan.layers {
        let at = |e: anyhow::Error| e.context(format!("layer {}", layer.index));
        anyhow::ensure!(
            layer.experts_beside.is_none(),
            "layer {}: experts beside the dense MLP (Gemma 4) are not implemented on the CUDA \
             backend",
            layer.index
        );
        anyhow::ensure!(
            layer.per_layer_input.is_none() && !layer.output_scale,
            "layer {}: per-layer inputs and layer scalars (Gemma 4) are not implemented on the \
             CUDA backend",
            layer.index
        );
        match &layer.mixer {
            Mixer::Attention(a) => {
                attention(a).map_err(at)?;
                // The output bias joins the residual with the next norm's add
                // (crate::forward), which a post-norm would have to scale first.
                anyhow::ensure!(
                    !(a.output_bias && layer.post_norms),
                    "layer {}: an attention output bias with post-norms is not supported by \
                     the CUDA backend",
                    layer.index
                );
            }
            Mixer::LinearAttention(g) => linear_attention(g).map_err(at)?,
        }
        match &layer.mlp {
            MlpSpec::Gated { width, activation } => {
                anyhow::ensure!(
                    width.is_multiple_of(8),
                    "the intermediate size ({width}) must be a multiple of 8"
                );
                anyhow::ensure!(
                    *activation != Activation::ClampedSwiglu,
                    "the clamped SwiGLU is not implemented on the CUDA backend"
                );
            }
            MlpSpec::Experts { activation, moe } => experts(*activation, moe).map_err(at)?,
        }
    }
    Ok(())
}

fn attention(a: &AttentionSpec) -> anyhow::Result<()> {
    anyhow::ensure!(
        !a.v_norm && !a.values_are_keys,
        "Gemma 4's V norm and keys-as-values attention are not implemented on the CUDA backend"
    );
    anyhow::ensure!(
        a.kv_source.is_none(),
        "layers that read another layer's K/V (Gemma 4's KV sharing) are not implemented on \
         the CUDA backend"
    );
    anyhow::ensure!(
        a.rope.inv_freq.iter().all(|&f| f > 0.0),
        "proportional RoPE (Gemma 4's global layers: frequencies that do not turn) is not \
         implemented on the CUDA backend"
    );
    let rotary = 2 * a.rope.inv_freq.len();
    anyhow::ensure!(
        rotary.is_multiple_of(4) && rotary <= a.head_dim,
        "the CUDA RoPE kernel turns a multiple of 4 dims of a head, not {rotary}"
    );
    anyhow::ensure!(
        HEAD_DIMS.contains(&a.head_dim),
        "the CUDA kernels support head_dim {HEAD_DIMS:?}, not {}",
        a.head_dim
    );
    let group = a.group();
    anyhow::ensure!(
        group <= MAX_GROUP,
        "query group {group} > {MAX_GROUP} is not supported"
    );
    // The per-head Q/K norm runs before the kernel that adds the QKV bias; no architecture
    // has both.
    anyhow::ensure!(
        !(a.qk_norm && a.qkv_bias),
        "Q/K norm together with a QKV bias is not supported by the CUDA backend"
    );
    Ok(())
}

fn linear_attention(g: &LinearAttentionSpec) -> anyhow::Result<()> {
    anyhow::ensure!(
        g.key_head_dim <= GDN_MAX_DK && g.value_head_dim <= GDN_MAX_DV,
        "the CUDA linear-attention kernels take key heads of <= {GDN_MAX_DK} dims and value \
         heads of <= {GDN_MAX_DV}, not {} and {}",
        g.key_head_dim,
        g.value_head_dim
    );
    anyhow::ensure!(
        recurrence_block(g.key_head_dim, g.value_head_dim).is_some(),
        "the CUDA delta-rule kernel takes key heads of <= 64 dims beside value heads of more \
         than 128, not {} and {}",
        g.key_head_dim,
        g.value_head_dim
    );
    anyhow::ensure!(
        (1..=GDN_MAX_TAPS).contains(&g.conv_kernel),
        "the CUDA convolution takes 1..={GDN_MAX_TAPS} taps, not {}",
        g.conv_kernel
    );
    Ok(())
}

fn experts(activation: Activation, moe: &MoeConfig) -> anyhow::Result<()> {
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
        matches!(activation, Activation::Silu | Activation::ClampedSwiglu),
        "the CUDA expert kernels apply SwiGLU or the clamped SwiGLU; {activation:?} experts \
         are not supported"
    );
    anyhow::ensure!(
        !(moe.biases && moe.shared_expert_intermediate_size.is_some()),
        "expert biases together with a shared expert are not supported by the CUDA backend"
    );
    let shared = moe.shared_expert_intermediate_size.unwrap_or(8);
    anyhow::ensure!(
        moe.expert_intermediate_size.is_multiple_of(8) && shared.is_multiple_of(8),
        "expert widths must be multiples of 8 (experts {}, shared {shared})",
        moe.expert_intermediate_size
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use ferrite_model::load::hf_config;
    use ferrite_model::plan::ModelPlan;

    /// Gemma 4 (fixtures/arch/gemma4*, issue 38) is refused when the backend is created, by a
    /// message naming what is missing, not by a panic in the loader or a kernel.
    #[test]
    fn gemma4_is_refused_by_name() {
        for arch in ["gemma4", "gemma4_moe"] {
            let path = format!(
                "{}/../../fixtures/arch/{arch}/config.json",
                env!("CARGO_MANIFEST_DIR")
            );
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            let plan = ModelPlan::new(&hf_config(&text).unwrap()).unwrap();
            let err = super::supports(&plan).expect_err(arch).to_string();
            assert!(
                err.contains("Gemma 4") && err.contains("CUDA"),
                "{arch}: {err}"
            );
        }
    }
}
