//! Every token's text as bytes, given by the server (the engine otherwise knows tokens by id
//! only), for llama.cpp's `infill` sampler (`sampler/infill.rs`), which compares candidates'
//! texts.

use std::sync::Arc;

/// Every token's text as bytes; empty for special tokens (they are never a prefix).
#[derive(Debug)]
pub struct TokenPieces(Vec<Box<[u8]>>);

impl TokenPieces {
    pub fn new(pieces: Vec<Vec<u8>>) -> Self {
        Self(pieces.into_iter().map(Vec::into_boxed_slice).collect())
    }

    pub(crate) fn get(&self, token: u32) -> &[u8] {
        self.0.get(token as usize).map_or(&[], |p| p)
    }
}

/// A request's `infill` sampler: the pieces it compares (shared; equal when the same).
#[derive(Debug, Clone)]
pub struct InfillSampling(pub Arc<TokenPieces>);

impl PartialEq for InfillSampling {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
