//! SwiGLU: `silu(gate) * up` with `silu(x) = x / (1 + e^(−x))`.

/// Overwrites `gate` with `silu(gate) * up`, element-wise.
pub fn silu_mul(gate: &mut [f32], up: &[f32]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = *g / (1.0 + (-*g).exp()) * u;
    }
}
