//! Where the loader puts every tensor of the model in the weight arena: f32 vectors (norms,
//! biases, RoPE frequencies) at an offset each, and each linear layer as parts stacked along
//! its output rows (Q/K/V fused into one layer, gate/up into another), consecutive file
//! tensors of one format sharing a part. A part is bf16, or a GGUF block format kept in its own
//! bits (crate::quant), one region per plane (an FP8 part also holds its scales again,
//! block-major, for crate::fp8_gemm).

use std::collections::HashMap;

use ferrite_model::config::ModelConfig;

use crate::buffer::Layout;
use crate::linear::MatrixFormat;
use crate::quant::QuantType;
use ferrite_model::tensor_names::{ExpertProj, LayerTensor, OUTPUT, OUTPUT_NORM, TOKEN_EMBD};

/// Output rows `row0 .. row0 + rows` of a linear layer, in one format, and the arena offsets
/// of its planes (one for bf16).
#[derive(Debug, Clone)]
pub(super) struct PartPlan {
    pub row0: usize,
    pub rows: usize,
    pub format: MatrixFormat,
    pub planes: Vec<usize>,
}

#[derive(Debug, Clone)]
pub(super) struct LinearPlan {
    pub rows: usize,
    pub k: usize,
    pub parts: Vec<PartPlan>,
}

/// Where a file matrix goes: its layer, its part, and its first row inside the part.
#[derive(Debug, Clone)]
pub(super) struct MatrixSlot {
    pub linear: String,
    pub part: usize,
    pub row_in_part: usize,
}

pub(super) struct Plan {
    pub layout: Layout,
    /// f32 regions by name: norms, `rope_inv_freq`, the fused `attn_qkv_bias`.
    pub vectors: HashMap<String, usize>,
    pub linears: HashMap<String, LinearPlan>,
    pub matrices: HashMap<String, MatrixSlot>,
    /// bf16 expert stacks by file tensor name (`expert_stacks`).
    pub experts: HashMap<String, usize>,
}

/// Routers and qwen2_moe's shared-expert gate stay bf16 whatever the file holds: small, and
/// the shared gate's single row suits no quantized kernel.
fn forced_bf16(tensor: &str) -> bool {
    tensor.ends_with(LayerTensor::FfnGateInp.suffix())
        || tensor.ends_with(LayerTensor::FfnGateInpShexp.suffix())
}

/// The file tensors of each linear layer, in output-row order, with their row counts.
fn linear_sources(c: &ModelConfig) -> Vec<(String, usize, Vec<(String, usize)>)> {
    let (hidden, inter) = (c.hidden_size, c.intermediate_size);
    let (q_dim, kv_dim) = (c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim);
    let one = |name: &str, rows| vec![(name.to_string(), rows)];
    let mut out = vec![(
        "token_embd".to_string(),
        hidden,
        one(TOKEN_EMBD, c.vocab_size),
    )];
    for l in 0..c.num_layers {
        let n = |p: &str| format!("blk.{l}.{p}");
        out.push((
            n("attn_qkv"),
            hidden,
            vec![
                (LayerTensor::AttnQ.of(l), q_dim),
                (LayerTensor::AttnK.of(l), kv_dim),
                (LayerTensor::AttnV.of(l), kv_dim),
            ],
        ));
        out.push((
            n("attn_output"),
            q_dim,
            one(&LayerTensor::AttnOutput.of(l), hidden),
        ));
        match c.moe_at(l) {
            None => {
                out.push((
                    n("ffn_gate_up"),
                    hidden,
                    vec![
                        (LayerTensor::FfnGate.of(l), inter),
                        (LayerTensor::FfnUp.of(l), inter),
                    ],
                ));
                out.push((
                    n("ffn_down"),
                    inter,
                    one(&LayerTensor::FfnDown.of(l), hidden),
                ));
            }
            // The experts themselves are stacks (`expert_stacks`); the router and qwen2_moe's
            // shared expert are linear layers.
            Some(moe) => {
                let router = one(&LayerTensor::FfnGateInp.of(l), moe.num_experts);
                out.push((n("ffn_gate_inp"), hidden, router));
                if let Some(width) = moe.shared_expert_intermediate_size {
                    out.push((
                        n("ffn_shexp_gate_up"),
                        hidden,
                        vec![
                            (LayerTensor::FfnGateShexp.of(l), width),
                            (LayerTensor::FfnUpShexp.of(l), width),
                        ],
                    ));
                    out.push((
                        n("ffn_down_shexp"),
                        width,
                        one(&LayerTensor::FfnDownShexp.of(l), hidden),
                    ));
                    out.push((
                        n("ffn_gate_inp_shexp"),
                        hidden,
                        one(&LayerTensor::FfnGateInpShexp.of(l), 1),
                    ));
                }
            }
        }
    }
    if !c.tie_word_embeddings {
        out.push(("output".into(), hidden, one(OUTPUT, c.vocab_size)));
    }
    out
}

/// The stacked bf16 experts of every sparse layer: (file tensor name, bytes), the tensor
/// `[experts, rows, cols]` as llama.cpp's GGUF files and `ferrite_model::dummy` name it.
fn expert_stacks(c: &ModelConfig) -> Vec<(String, usize)> {
    let hidden = c.hidden_size;
    let mut out = Vec::new();
    for l in 0..c.num_layers {
        let Some(moe) = c.moe_at(l) else { continue };
        let bytes = moe.num_experts * moe.expert_intermediate_size * hidden * 2;
        for proj in ExpertProj::ALL {
            out.push((proj.stacked().of(l), bytes));
        }
    }
    out
}

/// The f32 vectors: (region name, elements).
fn vector_regions(c: &ModelConfig) -> Vec<(String, usize)> {
    let (hidden, hd) = (c.hidden_size, c.head_dim);
    let qkv = (c.num_heads + 2 * c.num_kv_heads) * hd;
    let mut out = Vec::new();
    for l in 0..c.num_layers {
        let n = |p: &str| format!("blk.{l}.{p}");
        out.push((LayerTensor::AttnNorm.of(l), hidden));
        if c.block.qk_norm {
            out.push((LayerTensor::AttnQNorm.of(l), hd));
            out.push((LayerTensor::AttnKNorm.of(l), hd));
        }
        if c.block.post_norms {
            out.push((LayerTensor::PostAttentionNorm.of(l), hidden));
            out.push((LayerTensor::PostFfwNorm.of(l), hidden));
        }
        out.push((n("rope_inv_freq"), hd / 2));
        if c.qkv_bias {
            out.push((n("attn_qkv_bias"), qkv));
        }
        out.push((LayerTensor::FfnNorm.of(l), hidden));
    }
    out.push((OUTPUT_NORM.into(), hidden));
    out
}

impl Plan {
    /// The plan for `c`, each file matrix stored as `format_of(tensor name, k)` says.
    pub fn new(c: &ModelConfig, format_of: &dyn Fn(&str, usize) -> MatrixFormat) -> Plan {
        let mut layout = Layout::new();
        let mut vectors = HashMap::new();
        for (name, elems) in vector_regions(c) {
            vectors.insert(name, layout.take(elems * 4));
        }
        let mut linears = HashMap::new();
        let mut matrices = HashMap::new();
        for (linear, k, sources) in linear_sources(c) {
            let mut parts: Vec<PartPlan> = Vec::new();
            let mut row = 0;
            for (tensor, rows) in sources {
                let format = if forced_bf16(&tensor) {
                    MatrixFormat::Bf16
                } else {
                    format_of(&tensor, k)
                };
                match parts.last_mut() {
                    Some(last) if last.format == format => last.rows += rows,
                    _ => parts.push(PartPlan {
                        row0: row,
                        rows,
                        format,
                        planes: Vec::new(),
                    }),
                }
                let part = parts.len() - 1;
                let row_in_part = row - parts[part].row0;
                let slot = MatrixSlot {
                    linear: linear.clone(),
                    part,
                    row_in_part,
                };
                matrices.insert(tensor, slot);
                row += rows;
            }
            for part in &mut parts {
                part.planes = match part.format {
                    MatrixFormat::Bf16 => vec![layout.take(part.rows * k * 2)],
                    MatrixFormat::Quant(q) => {
                        let blocks = part.rows * (k / q.block_len());
                        let mut planes: Vec<usize> = q
                            .plane_bytes()
                            .iter()
                            .map(|b| layout.take(blocks * b))
                            .collect();
                        if q == QuantType::Fp8 {
                            // The scales again, block-major, for cuBLASLt (crate::fp8_gemm).
                            planes.push(layout.take(blocks * 4));
                        }
                        planes
                    }
                };
            }
            linears.insert(
                linear,
                LinearPlan {
                    rows: row,
                    k,
                    parts,
                },
            );
        }
        let experts = expert_stacks(c)
            .into_iter()
            .map(|(name, bytes)| (name, layout.take(bytes)))
            .collect();
        Plan {
            layout,
            vectors,
            linears,
            matrices,
            experts,
        }
    }

    /// The f32 region and byte offset inside it of a vector tensor: the Q/K/V biases land in
    /// the fused bias region.
    pub fn vector_slot(&self, c: &ModelConfig, name: &str) -> Option<usize> {
        let (q_dim, kv_dim) = (c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim);
        if let Some((layer, part)) = name.strip_prefix("blk.").and_then(|r| r.split_once('.')) {
            let inner = [
                (LayerTensor::AttnQBias, 0),
                (LayerTensor::AttnKBias, q_dim * 4),
                (LayerTensor::AttnVBias, (q_dim + kv_dim) * 4),
            ]
            .into_iter()
            .find(|(bias, _)| bias.suffix() == part)
            .map(|(_, at)| at);
            if let Some(inner) = inner {
                let region = format!("blk.{layer}.attn_qkv_bias");
                return self.vectors.get(&region).map(|at| at + inner);
            }
        }
        self.vectors.get(name).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::QuantType;
    use ferrite_model::dummy::preset;

    #[test]
    fn parts_group_consecutive_tensors_of_one_format() {
        let c = preset("qwen2.5-0.5b").expect("preset");
        // A Q4_K_M-like mix: Q and K in Q5_0, V in Q8_0; gate/up both Q5_0.
        let plan = Plan::new(&c, &|name, _k| {
            if name.ends_with("attn_v.weight") {
                MatrixFormat::Quant(QuantType::Q8_0)
            } else if name.contains("token_embd") {
                MatrixFormat::Bf16
            } else {
                MatrixFormat::Quant(QuantType::Q5_0)
            }
        });
        let qkv = &plan.linears["blk.0.attn_qkv"];
        let q_dim = c.num_heads * c.head_dim;
        let kv_dim = c.num_kv_heads * c.head_dim;
        assert_eq!(qkv.parts.len(), 2);
        assert_eq!((qkv.parts[0].row0, qkv.parts[0].rows), (0, q_dim + kv_dim));
        assert_eq!(qkv.parts[1].row0, q_dim + kv_dim);
        assert_eq!(qkv.parts[0].planes.len(), 3);
        let k_slot = &plan.matrices["blk.0.attn_k.weight"];
        assert_eq!((k_slot.part, k_slot.row_in_part), (0, q_dim));
        let v_slot = &plan.matrices["blk.0.attn_v.weight"];
        assert_eq!((v_slot.part, v_slot.row_in_part), (1, 0));
        assert_eq!(plan.linears["blk.0.ffn_gate_up"].parts.len(), 1);
        assert_eq!(
            plan.linears["token_embd"].parts[0].format,
            MatrixFormat::Bf16
        );
        // Quantized parts take exactly the file's bytes.
        let p = &plan.linears["blk.0.ffn_down"].parts[0];
        assert_eq!(p.planes.len(), 3);
        assert!(plan.vector_slot(&c, "blk.0.attn_v.bias").is_some());
    }
}
