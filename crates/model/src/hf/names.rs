//! Hugging Face tensor names to GGUF's canonical ones, and the Q/K row permutation that turns
//! Hugging Face's rotate-half layout into GGUF's interleaved one.

/// The canonical name of a Hugging Face tensor as the llama-style families name them; `None`
/// for tensors ferrite does not use (e.g. `rotary_emb.inv_freq`). A family that names a
/// tensor otherwise (gemma3's `post_attention_layernorm`) translates it first.
pub fn canonical_name(hf: &str) -> Option<String> {
    match hf {
        "model.embed_tokens.weight" => return Some("token_embd.weight".into()),
        "model.norm.weight" => return Some("output_norm.weight".into()),
        "lm_head.weight" => return Some("output.weight".into()),
        _ => {}
    }
    let (layer, module, kind) = layer_tensor(hf)?;
    if let Some((expert, proj)) = expert_of(module) {
        return Some(format!("blk.{layer}.{proj}.{expert}.{kind}"));
    }
    let gguf = match module {
        "input_layernorm" => "attn_norm",
        "post_attention_layernorm" => "ffn_norm",
        "pre_feedforward_layernorm" => "ffn_norm",
        "post_feedforward_layernorm" => "post_ffw_norm",
        "self_attn.q_norm" => "attn_q_norm",
        "self_attn.k_norm" => "attn_k_norm",
        "self_attn.q_proj" => "attn_q",
        "self_attn.k_proj" => "attn_k",
        "self_attn.v_proj" => "attn_v",
        "self_attn.o_proj" => "attn_output",
        "mlp.gate_proj" => "ffn_gate",
        "mlp.up_proj" => "ffn_up",
        "mlp.down_proj" => "ffn_down",
        // Mixture of experts: the router, qwen2_moe's shared expert and its gate.
        "mlp.gate" | "block_sparse_moe.gate" => "ffn_gate_inp",
        "mlp.shared_expert.gate_proj" => "ffn_gate_shexp",
        "mlp.shared_expert.up_proj" => "ffn_up_shexp",
        "mlp.shared_expert.down_proj" => "ffn_down_shexp",
        "mlp.shared_expert_gate" => "ffn_gate_inp_shexp",
        _ => return None,
    };
    Some(format!("blk.{layer}.{gguf}.{kind}"))
}

/// `(layer, rest)` of `model.layers.{layer}.{rest}`, whatever the rest (parameters such as
/// `linear_attn.A_log` have no `.weight`).
pub fn layer_module(hf: &str) -> Option<(usize, &str)> {
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, rest) = rest.split_once('.')?;
    Some((layer.parse().ok()?, rest))
}

/// `(layer, module, kind)` of `model.layers.{layer}.{module}.{kind}` where kind is `weight`
/// or `bias`.
pub fn layer_tensor(hf: &str) -> Option<(usize, &str, &str)> {
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, rest) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let (module, kind) = rest.rsplit_once('.')?;
    (kind == "weight" || kind == "bias").then_some((layer, module, kind))
}

/// `(expert, projection)` of one expert's matrix: `mlp.experts.{e}.gate_proj` (qwen MoE) or
/// `block_sparse_moe.experts.{e}.w1` (Mixtral: w1 gate, w3 up, w2 down). The canonical name is
/// llama.cpp's per-expert one, `blk.{i}.ffn_gate.{e}.weight` (as older Mixtral GGUF files have
/// it); `ModelWeights::expert` reads it or a slice of a stacked `ffn_gate_exps`.
fn expert_of(module: &str) -> Option<(usize, &'static str)> {
    let rest = module
        .strip_prefix("mlp.experts.")
        .or_else(|| module.strip_prefix("block_sparse_moe.experts."))?;
    let (expert, proj) = rest.split_once('.')?;
    let proj = match proj {
        "gate_proj" | "w1" => "ffn_gate",
        "up_proj" | "w3" => "ffn_up",
        "down_proj" | "w2" => "ffn_down",
        _ => return None,
    };
    Some((expert.parse().ok()?, proj))
}

/// llama.cpp's `permute(w, n_head)` (convert_hf_to_gguf.py): within each head of `head_dim`
/// rows, row `j * head_dim/2 + i` moves to `2 * i + j`, so that the pairs rotate-half rotates
/// together become adjacent. `row_bytes` is the size of one row (one element for a bias).
pub fn permute_rows_for_interleaved_rope(
    data: &[u8],
    row_bytes: usize,
    head_dim: usize,
) -> Vec<u8> {
    let half = head_dim / 2;
    let head_bytes = head_dim * row_bytes;
    let mut out = vec![0u8; data.len()];
    for (src_head, dst_head) in data
        .chunks_exact(head_bytes)
        .zip(out.chunks_exact_mut(head_bytes))
    {
        for i in 0..half {
            for j in 0..2 {
                let src = (j * half + i) * row_bytes;
                let dst = (2 * i + j) * row_bytes;
                dst_head[dst..dst + row_bytes].copy_from_slice(&src_head[src..src + row_bytes]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn experts_routers_and_shared_experts_get_llama_cpp_names() {
        let name = canonical_name;
        assert_eq!(
            name("model.layers.3.mlp.experts.17.down_proj.weight").as_deref(),
            Some("blk.3.ffn_down.17.weight")
        );
        assert_eq!(
            name("model.layers.0.block_sparse_moe.experts.2.w1.weight").as_deref(),
            Some("blk.0.ffn_gate.2.weight")
        );
        assert_eq!(
            name("model.layers.0.block_sparse_moe.experts.2.w3.weight").as_deref(),
            Some("blk.0.ffn_up.2.weight")
        );
        assert_eq!(
            name("model.layers.1.mlp.gate.weight").as_deref(),
            Some("blk.1.ffn_gate_inp.weight")
        );
        assert_eq!(
            name("model.layers.1.mlp.shared_expert_gate.weight").as_deref(),
            Some("blk.1.ffn_gate_inp_shexp.weight")
        );
        assert_eq!(
            name("model.layers.1.mlp.shared_expert.up_proj.weight").as_deref(),
            Some("blk.1.ffn_up_shexp.weight")
        );
        assert_eq!(name("model.layers.1.mlp.experts.x.w9.weight"), None);
    }
}
