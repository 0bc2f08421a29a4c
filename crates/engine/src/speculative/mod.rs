//! Speculative decoding: cheap proposals of several tokens that the target model checks in
//! one forward pass, keeping its output distribution exactly.

pub mod acceptance;
pub mod constrained;
pub mod draft_head;
pub mod draft_model;
pub mod ngram;
pub mod policy;
pub mod prediction;
pub mod proposer;
pub mod speculation;
pub mod suffix;
pub mod suffix_trie;
pub mod verify;

pub use crate::distribution::Distribution;
pub use acceptance::accept_drafts;
pub use draft_head::HeadProposer;
pub use draft_model::DraftModel;
pub use ngram::NgramConfig;
pub use proposer::{DraftRequest, Drafts, NgramProposer, Proposer};
pub use speculation::Speculation;
pub use suffix::{SuffixConfig, SuffixProposer};
pub use verify::{verify_greedy, verify_sampled, Verdict};
