//! Where the loader puts every tensor of the model in the weight arena: f32 vectors (norms,
//! biases, RoPE frequencies) at an offset each, and each linear layer as parts stacked along
//! its output rows (Q/K/V fused into one layer, gate/up into another), consecutive file
//! tensors of one format sharing a part. A part is bf16, or a GGUF block format kept in its own
//! bits (crate::quant), one region per plane (an FP8 part also holds its scales again,
//! block-major, for crate::fp8_gemm).

use std::collections::HashMap;

use ferrite_model::plan::{Mixer, MlpSpec, ModelPlan, TensorRole, TensorSpec};

use crate::buffer::{DeviceBuffer, Layout};
use crate::launchers::{ExpertFormat, ExpertMatrix};
use crate::linear::MatrixFormat;
use crate::quant::QuantType;
use ferrite_model::tensor_names::{ExpertProj, LayerTensor, OUTPUT, OUTPUT_NORM};

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

pub(super) struct Arena {
    pub layout: Layout,
    /// f32 regions by name: norms, `rope_inv_freq`, the fused `attn_qkv_bias`.
    pub vectors: HashMap<String, usize>,
    pub linears: HashMap<String, LinearPlan>,
    pub matrices: HashMap<String, MatrixSlot>,
    /// Expert stacks by file tensor name (`expert_stacks`).
    pub experts: HashMap<String, StackPlan>,
}

/// An expert stack's format and the arena offsets of its planes (`ExpertMatrix`'s two).
#[derive(Debug, Clone, Copy)]
pub(super) struct StackPlan {
    pub format: ExpertFormat,
    pub values: usize,
    pub second_plane: Option<usize>,
}

impl StackPlan {
    /// Its device addresses in `arena`.
    pub fn on(&self, arena: &DeviceBuffer) -> ExpertMatrix {
        ExpertMatrix {
            format: self.format,
            values: arena.at(self.values),
            second_plane: self.second_plane.map(|at| arena.at(at)),
        }
    }
}

/// Routers and qwen2_moe's shared-expert gate stay bf16 whatever the file holds: small, and
/// the shared gate's single row suits no quantized kernel.
fn forced_bf16(tensor: &str) -> bool {
    tensor.ends_with(LayerTensor::FfnGateInp.suffix())
        || tensor.ends_with(LayerTensor::FfnGateInpShexp.suffix())
}

/// One linear layer of the arena: its name, its input width, and the file tensors it stacks
/// in output-row order with their row counts.
struct LinearSource {
    name: String,
    k: usize,
    tensors: Vec<(String, usize)>,
}

/// Every linear layer of the model.
fn linear_sources(plan: &ModelPlan) -> anyhow::Result<Vec<LinearSource>> {
    let embedding = plan.embedding();
    let mut out = vec![LinearSource {
        name: "token_embd".to_string(),
        k: embedding.cols(),
        tensors: vec![(embedding.name.clone(), embedding.rows())],
    }];
    for layer in &plan.layers {
        let n = |p: &str| format!("blk.{}.{p}", layer.index);
        // The file tensors of one linear layer (all of input width `k`), in output-row order.
        let fused = |name: &str, parts: &[LayerTensor]| -> anyhow::Result<_> {
            let specs = parts
                .iter()
                .map(|&t| layer.required(t))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(LinearSource {
                name: n(name),
                k: specs[0].cols(),
                tensors: specs
                    .into_iter()
                    .map(|s| (s.name.clone(), s.rows()))
                    .collect(),
            })
        };
        match &layer.mixer {
            Mixer::Attention(a) => {
                // Gated attention's output gate rides along after V (one GEMM).
                let mut qkv = vec![LayerTensor::AttnQ, LayerTensor::AttnK, LayerTensor::AttnV];
                if a.output_gate {
                    qkv.push(LayerTensor::AttnOutputGate);
                }
                out.push(fused("attn_qkv", &qkv)?);
                out.push(fused("attn_output", &[LayerTensor::AttnOutput])?);
            }
            Mixer::LinearAttention(_) => {
                // One input projection: q, k, v (convolved), then z, beta, alpha.
                let inputs = [
                    LayerTensor::AttnQkv,
                    LayerTensor::AttnGate,
                    LayerTensor::SsmBeta,
                    LayerTensor::SsmAlpha,
                ];
                out.push(fused("ssm_in", &inputs)?);
                out.push(fused("ssm_out", &[LayerTensor::SsmOut])?);
            }
        }
        match &layer.mlp {
            MlpSpec::Gated { .. } => {
                out.push(fused(
                    "ffn_gate_up",
                    &[LayerTensor::FfnGate, LayerTensor::FfnUp],
                )?);
                out.push(fused("ffn_down", &[LayerTensor::FfnDown])?);
            }
            // The experts themselves are stacks (`expert_stacks`); the router and qwen2_moe's
            // shared expert are linear layers.
            MlpSpec::Experts { moe, .. } => {
                out.push(fused("ffn_gate_inp", &[LayerTensor::FfnGateInp])?);
                if moe.shared_expert_intermediate_size.is_some() {
                    let gate_up = [LayerTensor::FfnGateShexp, LayerTensor::FfnUpShexp];
                    out.push(fused("ffn_shexp_gate_up", &gate_up)?);
                    out.push(fused("ffn_down_shexp", &[LayerTensor::FfnDownShexp])?);
                    out.push(fused(
                        "ffn_gate_inp_shexp",
                        &[LayerTensor::FfnGateInpShexp],
                    )?);
                }
            }
        }
    }
    if !plan.tied_output {
        out.push(LinearSource {
            name: "output".into(),
            k: plan.hidden_size,
            tensors: vec![(OUTPUT.to_string(), plan.vocab_size)],
        });
    }
    Ok(out)
}

/// The expert stacks of every sparse layer: (file tensor name, elements), the tensor
/// `[experts, rows, cols]` as llama.cpp's GGUF files and `ferrite_model::dummy` name it.
fn expert_stacks(plan: &ModelPlan) -> anyhow::Result<Vec<(String, usize)>> {
    let mut out = Vec::new();
    for layer in &plan.layers {
        match &layer.mlp {
            MlpSpec::Gated { .. } => {}
            MlpSpec::Experts { .. } => {
                for proj in ExpertProj::ALL {
                    let stack = layer.required(proj.stacked())?;
                    out.push((stack.name.clone(), stack.len()));
                }
            }
        }
    }
    Ok(out)
}

/// The f32 vectors: (region name, elements).
fn vector_regions(plan: &ModelPlan) -> Vec<(String, usize)> {
    let hidden = plan.hidden_size;
    let mut out = Vec::new();
    for layer in &plan.layers {
        let l = layer.index;
        out.push((LayerTensor::AttnNorm.of(l), hidden));
        match &layer.mixer {
            Mixer::Attention(a) => {
                if a.qk_norm {
                    out.push((LayerTensor::AttnQNorm.of(l), a.head_dim));
                    out.push((LayerTensor::AttnKNorm.of(l), a.head_dim));
                }
            }
            Mixer::LinearAttention(g) => {
                let taps = g.conv_channels() * g.conv_kernel;
                out.push((LayerTensor::SsmConv1d.of(l), taps));
                out.push((LayerTensor::SsmDtBias.of(l), g.num_value_heads));
                out.push((LayerTensor::SsmA.of(l), g.num_value_heads));
                out.push((LayerTensor::SsmNorm.of(l), g.value_head_dim));
            }
        }
        if layer.post_norms {
            out.push((LayerTensor::PostAttentionNorm.of(l), hidden));
            out.push((LayerTensor::PostFfwNorm.of(l), hidden));
        }
        match &layer.mixer {
            Mixer::Attention(a) => {
                out.push((format!("blk.{l}.rope_inv_freq"), a.rope.inv_freq.len()));
                if a.qkv_bias {
                    out.push((format!("blk.{l}.attn_qkv_bias"), a.q_dim() + 2 * a.kv_dim()));
                }
                if a.sinks {
                    out.push((LayerTensor::AttnSinks.of(l), a.num_heads));
                }
                if a.output_bias {
                    out.push((LayerTensor::AttnOutputBias.of(l), hidden));
                }
            }
            Mixer::LinearAttention(_) => {}
        }
        out.push((LayerTensor::FfnNorm.of(l), hidden));
        if let MlpSpec::Experts { moe, .. } = &layer.mlp {
            if moe.biases {
                let (experts, width) = (moe.num_experts, moe.expert_intermediate_size);
                out.push((LayerTensor::FfnGateInpBias.of(l), experts));
                out.push((LayerTensor::FfnGateExpsBias.of(l), experts * width));
                out.push((LayerTensor::FfnUpExpsBias.of(l), experts * width));
                out.push((LayerTensor::FfnDownExpsBias.of(l), experts * hidden));
            }
        }
    }
    out.push((OUTPUT_NORM.into(), hidden));
    out
}

impl Arena {
    /// Where every tensor of `plan` and the `outer` tensors beside its layers (an MTP
    /// layer's input projection and norms: a linear layer of their own or a vector each) go,
    /// each file matrix stored as `format_of(tensor name, k)` says and each expert stack as
    /// `stack_format(name)`.
    pub fn new(
        plan: &ModelPlan,
        outer: &[TensorSpec],
        format_of: &dyn Fn(&str, usize) -> MatrixFormat,
        stack_format: &dyn Fn(&str) -> ExpertFormat,
    ) -> anyhow::Result<Arena> {
        let mut layout = Layout::new();
        let mut vectors = HashMap::new();
        let outer_vectors = outer
            .iter()
            .filter(|t| t.role != TensorRole::Matrix)
            .map(|t| (t.name.clone(), t.len()));
        for (name, elems) in vector_regions(plan).into_iter().chain(outer_vectors) {
            vectors.insert(name, layout.take(elems * 4));
        }
        let mut linears = HashMap::new();
        let mut matrices = HashMap::new();
        let outer_matrices = outer
            .iter()
            .filter(|t| t.role == TensorRole::Matrix)
            .map(|t| LinearSource {
                name: t.name.clone(),
                k: t.cols(),
                tensors: vec![(t.name.clone(), t.rows())],
            });
        for source in linear_sources(plan)?.into_iter().chain(outer_matrices) {
            let (linear, k, sources) = (source.name, source.k, source.tensors);
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
        let experts = expert_stacks(plan)?
            .into_iter()
            .map(|(name, elements)| {
                let format = stack_format(&name);
                let [values, second] = format.plane_bytes(elements);
                let stack = StackPlan {
                    format,
                    values: layout.take(values),
                    second_plane: (second > 0).then(|| layout.take(second)),
                };
                (name, stack)
            })
            .collect();
        Ok(Arena {
            layout,
            vectors,
            linears,
            matrices,
            experts,
        })
    }

    /// The f32 region and byte offset inside it of a vector tensor: the Q/K/V biases land in
    /// the fused bias region.
    pub fn vector_slot(&self, plan: &ModelPlan, name: &str) -> Option<usize> {
        if let Some((layer, part)) = name.strip_prefix("blk.").and_then(|r| r.split_once('.')) {
            let spec = plan.layers.get(layer.parse::<usize>().ok()?)?;
            let (q_dim, kv_dim) = match &spec.mixer {
                Mixer::Attention(a) => (a.q_dim(), a.kv_dim()),
                // No biases: every vector has a region of its own.
                Mixer::LinearAttention(_) => return self.vectors.get(name).copied(),
            };
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
        let model = ModelPlan::new(&c).expect("plan");
        // A Q4_K_M-like mix: Q and K in Q5_0, V in Q8_0; gate/up both Q5_0.
        let bf16_stacks = |_: &str| ExpertFormat::Bf16;
        let arena = Arena::new(
            &model,
            &[],
            &|name, _k| {
                if name.ends_with("attn_v.weight") {
                    MatrixFormat::Quant(QuantType::Q8_0)
                } else if name.contains("token_embd") {
                    MatrixFormat::Bf16
                } else {
                    MatrixFormat::Quant(QuantType::Q5_0)
                }
            },
            &bf16_stacks,
        )
        .expect("arena");
        let qkv = &arena.linears["blk.0.attn_qkv"];
        let q_dim = c.num_heads * c.head_dim;
        let kv_dim = c.num_kv_heads * c.head_dim;
        assert_eq!(qkv.parts.len(), 2);
        assert_eq!((qkv.parts[0].row0, qkv.parts[0].rows), (0, q_dim + kv_dim));
        assert_eq!(qkv.parts[1].row0, q_dim + kv_dim);
        assert_eq!(qkv.parts[0].planes.len(), 3);
        let k_slot = &arena.matrices["blk.0.attn_k.weight"];
        assert_eq!((k_slot.part, k_slot.row_in_part), (0, q_dim));
        let v_slot = &arena.matrices["blk.0.attn_v.weight"];
        assert_eq!((v_slot.part, v_slot.row_in_part), (1, 0));
        assert_eq!(arena.linears["blk.0.ffn_gate_up"].parts.len(), 1);
        assert_eq!(
            arena.linears["token_embd"].parts[0].format,
            MatrixFormat::Bf16
        );
        // Quantized parts take exactly the file's bytes.
        let p = &arena.linears["blk.0.ffn_down"].parts[0];
        assert_eq!(p.planes.len(), 3);
        assert!(arena.vector_slot(&model, "blk.0.attn_v.bias").is_some());
    }

    /// Every tensor of a hybrid's plan (the qwen3_5 and qwen3_next fixtures' configs) and of
    /// gpt-oss's (sinks, biases) has a place: a matrix part, an expert stack or a vector
    /// region.
    #[test]
    fn every_tensor_of_a_hybrid_and_of_gpt_oss_has_a_place() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/arch");
        for arch in ["qwen3_5", "qwen3_next", "qwen3_5_moe", "gpt_oss"] {
            let text = std::fs::read_to_string(root.join(arch).join("config.json")).unwrap();
            let config = ferrite_model::load::hf_config(&text).unwrap();
            let model = ModelPlan::new(&config).unwrap();
            let mxfp4 = |_: &str| ExpertFormat::Mxfp4;
            let arena = Arena::new(&model, &[], &|_, _| MatrixFormat::Bf16, &mxfp4).unwrap();
            for t in model.tensors() {
                let placed = arena.matrices.contains_key(&t.name)
                    || arena.experts.contains_key(&t.name)
                    || arena.vector_slot(&model, &t.name).is_some();
                assert!(placed, "{arch}: no place for {}", t.name);
            }
        }
    }

    /// A multi-token-prediction layer placed as one more layer of the plan, its projection
    /// and norms beside it: each of its tensors has a place, the projection a linear layer of
    /// its own.
    #[test]
    fn every_tensor_of_an_mtp_layer_has_a_place() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/arch");
        for arch in ["qwen3_5", "qwen3_5_moe"] {
            let text = std::fs::read_to_string(root.join(arch).join("config.json")).unwrap();
            let config = ferrite_model::load::hf_config(&text).unwrap();
            let mtp = ferrite_model::plan::MtpSpec::of(&config).unwrap();
            let mut model = ModelPlan::new(&config).unwrap();
            model.layers.push(mtp.layer.clone());
            let bf16 = |_: &str| ExpertFormat::Bf16;
            let outer = mtp.outer_tensors();
            let arena = Arena::new(&model, &outer, &|_, _| MatrixFormat::Bf16, &bf16).unwrap();
            for t in mtp.tensors() {
                let placed = arena.matrices.contains_key(&t.name)
                    || arena.experts.contains_key(&t.name)
                    || arena.vector_slot(&model, &t.name).is_some();
                assert!(placed, "{arch}: no place for {}", t.name);
            }
            let proj = &outer[0].name;
            assert_eq!(arena.linears[proj].k, 2 * config.hidden_size);
        }
    }
}
