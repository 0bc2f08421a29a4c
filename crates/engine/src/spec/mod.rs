//! Speculative decoding: cheap proposals of several tokens that the target model checks in
//! one forward pass, keeping its output distribution exactly.

pub mod ngram;
pub mod verify;

pub use crate::distribution::Distribution;
pub use verify::{verify_greedy, verify_sampled, Verdict};
