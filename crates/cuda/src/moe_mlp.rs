//! A mixture-of-experts MLP in the step (crate::forward calls it for the layers the config
//! marks sparse): router GEMM -> routing (+ router bias) and grouping by expert (one block) ->
//! gate/up with (clamped) SwiGLU over every expert's rows (one launch) -> down (one launch) ->
//! each token's weighted sum in expert order (+ qwen2_moe's gated shared expert) into the
//! layer's output. gpt-oss's expert biases join in the products' epilogues. Every launch's
//! grid depends on the token count only, so decode graphs capture the layer like a dense
//! one.

use crate::device_ptr::DevicePtr;
use crate::forward::Model;
use crate::launchers::{moe_chunk, ExpertCounters, MoeDownArgs, MoeGateUpArgs};
use crate::linear::Linear;
use crate::weights::MoeWeights;

impl Model<'_> {
    /// The MLP of sparse layer `layer` on the `n` rows of `ws.xn`, written to `ws.delta`;
    /// `slots` (the step's KV slot per token) tells the expert-load counters which rows are
    /// padding.
    pub(crate) fn enqueue_moe(
        &self,
        moe: &MoeWeights,
        n: usize,
        layer: usize,
        slots: DevicePtr,
    ) -> anyhow::Result<()> {
        let (c, k, ws) = (self.config, self.kernels, self.ws);
        let b = ws
            .moe
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("the workspace has no mixture-of-experts buffers"))?;
        let (hidden, width, top_k) = (c.hidden_size, moe.width, moe.experts_per_token);
        let routed = n * top_k;
        let chunk = moe_chunk(routed, moe.experts);
        let linear = |x, w: &Linear, y| self.gemm.linear(k, x, w, y, n, ws.dequant);

        linear(ws.xn, &moe.router, b.logits)?;
        k.moe_route_group(
            b.logits,
            moe.experts,
            top_k,
            moe.norm_topk_prob,
            n,
            &b.routing,
            chunk,
            self.expert_load.map(|load| ExpertCounters {
                counts: load.layer(layer),
                slots,
            }),
            moe.biases.map(|b| b.router),
        )?;
        let gate_up = MoeGateUpArgs {
            gate: moe.gate,
            up: moe.up,
            width,
            x: ws.xn,
            act: b.act,
            k: hidden,
            biases: moe.biases.map(|b| (b.gate, b.up)),
            activation: moe.expert_activation,
        };
        k.moe_gate_up(&gate_up, &b.routing, routed, moe.experts, chunk)?;
        let down = MoeDownArgs {
            down: moe.down,
            rows: hidden,
            act: b.act,
            y: b.down,
            k: width,
            bias: moe.biases.map(|b| b.down),
        };
        k.moe_down(&down, &b.routing, routed, moe.experts, chunk)?;

        let shared = match &moe.shared {
            None => None,
            Some(s) => {
                linear(ws.xn, &s.gate_up, ws.gate_up)?;
                k.gated_activation(moe.activation, ws.gate_up, false, ws.act, s.width, n)?;
                linear(ws.act, &s.down, b.shared_out)?;
                linear(ws.xn, &s.gate, b.shared_score)?;
                Some((b.shared_out, b.shared_score))
            }
        };
        k.moe_combine(b.down, &b.routing, top_k, hidden, shared, ws.delta, n)
    }
}
