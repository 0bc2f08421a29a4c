//! The gated MLP activations, element-wise in f32: SwiGLU `silu(gate) * up` with
//! `silu(x) = x / (1 + e^(−x))`, and GeGLU `gelu_tanh(gate) * up` with PyTorch's tanh
//! approximation `gelu_tanh(x) = x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))`, and gpt-oss's
//! clamped SwiGLU.

use ferrite_model::config::{Activation, CLAMPED_SWIGLU_ALPHA, CLAMPED_SWIGLU_LIMIT};

/// √(2/π), as PyTorch's `gelu(approximate="tanh")` uses it.
const SQRT_2_OVER_PI: f32 = 0.797_884_6;

/// Overwrites `gate` with `silu(gate) * up`, element-wise.
pub fn silu_mul(gate: &mut [f32], up: &[f32]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = *g / (1.0 + (-*g).exp()) * u;
    }
}

/// Overwrites `gate` with `gelu_tanh(gate) * up`, element-wise.
pub fn gelu_tanh_mul(gate: &mut [f32], up: &[f32]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        let x = *g;
        let inner = SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x);
        *g = 0.5 * x * (1.0 + inner.tanh()) * u;
    }
}

/// Overwrites `gate` with gpt-oss's `(clamp(up, -L, L) + 1) · g · sigmoid(α g)`, `g = min(gate,
/// L)`, in transformers' order of operations.
pub fn clamped_swiglu_mul(gate: &mut [f32], up: &[f32]) {
    let (alpha, limit) = (CLAMPED_SWIGLU_ALPHA, CLAMPED_SWIGLU_LIMIT);
    for (g, &u) in gate.iter_mut().zip(up) {
        let x = g.min(limit);
        let glu = x * (1.0 / (1.0 + (-(x * alpha)).exp()));
        *g = (u.clamp(-limit, limit) + 1.0) * glu;
    }
}

/// Overwrites `gate` with `activation(gate) * up`.
pub fn gated(activation: Activation, gate: &mut [f32], up: &[f32]) {
    match activation {
        Activation::Silu => silu_mul(gate, up),
        Activation::GeluTanh => gelu_tanh_mul(gate, up),
        Activation::ClampedSwiglu => clamped_swiglu_mul(gate, up),
    }
}
