//! A mixture-of-experts MLP in the step (crate::forward calls it for the layers the config
//! marks sparse): router GEMM -> top-k routing -> grouping by expert -> one gate/up launch over
//! every expert's rows -> SiLU * up -> one down launch -> each token's weighted sum in expert
//! order (+ qwen2_moe's gated shared expert) into the layer's output. Every launch's grid
//! depends on the token count only, so decode graphs capture the layer like a dense one.

use crate::forward::Model;
use crate::kernels::MoeProductArgs;
use crate::linear::Linear;
use crate::weights::MoeWeights;

/// Largest grid.y of a launch: the activation over routed rows goes in pieces of this many.
const MAX_GRID_Y: usize = 65_535;

impl Model<'_> {
    /// The MLP of a sparse layer on the `n` rows of `ws.xn`, written to `ws.delta`.
    pub(crate) fn enqueue_moe(&self, moe: &MoeWeights, n: usize) -> anyhow::Result<()> {
        let (c, k, ws) = (self.config, self.kernels, self.ws);
        let b = ws
            .moe
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("the workspace has no mixture-of-experts buffers"))?;
        let (hidden, width, top_k) = (c.hidden_size, moe.width, moe.experts_per_token);
        let routed = n * top_k;
        let activation = c.block.activation;
        let linear = |x, w: &Linear, y| self.gemm.linear(k, x, w, y, n, ws.dequant);

        linear(ws.xn, &moe.router, b.logits)?;
        k.moe_route(
            b.logits,
            moe.experts,
            top_k,
            moe.norm_topk_prob,
            n,
            &b.routing,
        )?;
        k.moe_group(&b.routing, n, top_k, moe.experts, None)?;
        let product = |w_lo, w_hi, split_row, x, x_rows, y, rows, k_in| MoeProductArgs {
            w_lo,
            w_hi,
            split_row,
            x,
            x_rows,
            y,
            rows,
            k: k_in,
            choices: routed,
            experts: moe.experts,
        };
        // Gate rows from the gate stack, up rows from the up stack, x rows by token.
        let gate_up = product(
            moe.gate,
            moe.up,
            width,
            ws.xn,
            Some(b.routing.token_of_row),
            b.gate_up,
            2 * width,
            hidden,
        );
        k.moe_experts(&gate_up, b.routing.items)?;
        let mut first = 0;
        while first < routed {
            let rows = MAX_GRID_Y.min(routed - first);
            let gu = b.gate_up.offset(first * 2 * width * 4);
            k.gated_activation(activation, gu, b.act.offset(first * width * 2), width, rows)?;
            first += rows;
        }
        let down = product(
            moe.down, moe.down, hidden, b.act, None, b.down, hidden, width,
        );
        k.moe_experts(&down, b.routing.items)?;

        let shared = match &moe.shared {
            None => None,
            Some(s) => {
                linear(ws.xn, &s.gate_up, ws.gate_up)?;
                k.gated_activation(activation, ws.gate_up, ws.act, s.width, n)?;
                linear(ws.act, &s.down, b.shared_out)?;
                linear(ws.xn, &s.gate, b.shared_score)?;
                Some((b.shared_out, b.shared_score))
            }
        };
        k.moe_combine(b.down, &b.routing, top_k, hidden, shared, ws.delta, n)
    }
}
