//! Test support for the engine's unit tests: a deterministic fake model and a harness that
//! drives an engine core step by step.

pub mod fake_backend;
pub mod fake_constraint;
pub mod fake_state;
pub mod harness;
