//! One decoder layer of `Model`: its mixer (attention or linear attention), its MLP (dense or
//! a mixture of experts, Gemma 4's experts beside it), their norms and residual adds. The
//! decoder runs every layer through it, and a drafting layer (`crate::mtp`) its own.

use ferrite_engine::BackendError;
use rayon::prelude::*;

use super::{add_residual, sized, Model, Workspace, ROWS_PER_TASK};
use crate::attention_layer::{self, RopeTables, StepTokens};
use crate::kernels::activation::gated;
use crate::kernels::matmul::{matmul, matmul_group, MatmulJob};
use crate::kernels::norm::rms_norm;
use crate::kv_cache::KvCache;
use crate::linear_attention;
use crate::model_weights::{LayerWeights, Mixer, Mlp};
use crate::moe::moe_mlp;
use crate::recurrent_state::StateCache;
use crate::simd::Isa;

impl Model {
    /// One decoder layer (`layer`: its index, weights and RoPE, an index of `self.ropes`) over
    /// the step's rows `x` (`[n, hidden]`, `n` the tokens of `step`): the mixer, the MLP, their
    /// norms and residual adds. The RoPE tables are `ws.cos_sin` as `layout` lays them out.
    /// The mixer reads `mixer_input` where given (an EAGLE-3 head's layer, whose attention
    /// reads more than its residual stream), else `x` after the layer's first norm.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_layer(
        &self,
        isa: Isa,
        (layer_index, layer, rope): (usize, &LayerWeights, usize),
        x: &mut [f32],
        kv: &mut KvCache,
        state: Option<&mut StateCache>,
        step: &StepTokens<'_, '_>,
        layout: &[(usize, usize)],
        mixer_input: Option<&[f32]>,
        ws: &mut Workspace,
    ) -> Result<(), BackendError> {
        let hidden = self.config.hidden_size;
        let n = x.len() / hidden;
        let eps = self.norm.eps;
        let normed = sized(&mut ws.normed, n * hidden);
        let input: &[f32] = match mixer_input {
            Some(input) => input,
            None => {
                rms_norm(isa, x, &layer.attn_norm, eps, normed);
                &*normed
            }
        };
        let proj = sized(&mut ws.proj, n * hidden);
        // (a linear-attention layer has no rope: its entry is never read)
        let (rope_at, rope_width) = layout.get(rope).copied().unwrap_or_default();
        match &layer.mixer {
            Mixer::Attention(a) => attention_layer::forward(
                isa,
                a,
                layer_index,
                kv,
                &step,
                &RopeTables {
                    rope: &self.ropes[rope],
                    tables: &ws.cos_sin[rope_at..rope_at + n * rope_width],
                    width: rope_width,
                },
                input,
                n,
                eps,
                &mut ws.attention,
                proj,
            ),
            Mixer::LinearAttention(l) => {
                let state = state
                    .ok_or_else(|| BackendError("forward called before init_state_slots".into()))?;
                linear_attention::forward(
                    isa,
                    l,
                    layer_index,
                    state,
                    step.batch,
                    input,
                    n,
                    eps,
                    &mut ws.linear,
                    proj,
                )?;
            }
        }
        self.add_block_output(
            isa,
            x,
            proj,
            normed,
            layer.post_norms.as_ref().map(|p| &p[0]),
        );

        rms_norm(isa, x, &layer.ffn_norm, eps, normed);
        match &layer.mlp {
            Mlp::Moe {
                activation,
                weights,
            } => moe_mlp(
                isa,
                weights,
                *activation,
                normed,
                normed,
                n,
                &mut ws.moe,
                proj,
                Some(self.expert_load.layer(layer_index)),
            ),
            Mlp::Dense {
                activation,
                gate: w_gate,
                up: w_up,
                down: w_down,
            } => {
                let inter = w_gate.rows();
                let (gate, up) = (sized(&mut ws.gate, n * inter), sized(&mut ws.up, n * inter));
                matmul_group(
                    isa,
                    normed,
                    n,
                    &mut [
                        MatmulJob {
                            matrix: w_gate,
                            out: gate,
                        },
                        MatmulJob {
                            matrix: w_up,
                            out: up,
                        },
                    ],
                );
                gate.par_chunks_mut(ROWS_PER_TASK * inter)
                    .zip(up.par_chunks(ROWS_PER_TASK * inter))
                    .for_each(|(g, u)| gated(*activation, g, u));
                matmul(isa, gate, n, w_down, proj);
            }
        }
        if let Some(beside) = &layer.experts_beside {
            let load = Some(self.expert_load.layer(layer_index));
            beside.add(isa, x, n, eps, &mut ws.beside, proj, load);
        }
        self.add_block_output(
            isa,
            x,
            proj,
            normed,
            layer.post_norms.as_ref().map(|p| &p[1]),
        );
        if let (Some(p), Some(tables)) = (&layer.per_layer_input, &self.weights.per_layer) {
            let inputs = &ws.per_layer_inputs[..n * tables.len()];
            p.apply(isa, x, inputs, layer_index, n, eps, &mut ws.per_layer);
        }
        if let Some(scale) = layer.output_scale {
            x.iter_mut().for_each(|v| *v *= scale);
        }
        Ok(())
    }

    /// `x += out`, or `x += rms_norm(out)` with gemma3's post norms (`scratch` holds it).
    fn add_block_output(
        &self,
        isa: Isa,
        x: &mut [f32],
        out: &[f32],
        scratch: &mut [f32],
        post_norm: Option<&Vec<f32>>,
    ) {
        match post_norm {
            None => add_residual(x, out),
            Some(weight) => {
                rms_norm(isa, out, weight, self.norm.eps, scratch);
                add_residual(x, scratch);
            }
        }
    }
}
