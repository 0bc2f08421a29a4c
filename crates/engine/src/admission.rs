//! Requests the engine finishes on arrival instead of scheduling.

use crate::request::{FinishReason, GenerationRequest};

/// Why `request` cannot run, and how it finishes, or `None` when it can.
pub fn refusal(
    request: &GenerationRequest,
    vocab_size: usize,
    max_model_len: usize,
) -> Option<(&'static str, FinishReason)> {
    if request.prompt.is_empty() {
        Some(("empty prompt", FinishReason::Abort))
    } else if request.prompt.iter().any(|&t| t as usize >= vocab_size) {
        Some((
            "prompt token id outside the vocabulary",
            FinishReason::Abort,
        ))
    } else if (request.params.logit_rules.token_ids()).any(|t| t as usize >= vocab_size) {
        Some((
            "logit rule token id outside the vocabulary",
            FinishReason::Abort,
        ))
    } else if request.prompt.len() >= max_model_len {
        Some(("prompt leaves no room in the context", FinishReason::Length))
    } else if request.params.max_tokens == 0 {
        Some(("max_tokens is 0", FinishReason::Length))
    } else {
        None
    }
}
