//! What a client asks the engine for, and what the engine hands back, in token ids.

use std::sync::Arc;
use std::time::Instant;

use crate::constraint::Constraint;
use crate::logit_rules::LogitRules;
use crate::stats::{SpecSummary, StepStats};
use crate::token_pieces::InfillSampling;

pub type RequestId = u64;

/// Sampling and stopping parameters of one generation (one OpenAI choice).
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingParams {
    /// 0 means greedy.
    pub temperature: f32,
    /// In (0, 1]; 1 disables nucleus sampling.
    pub top_p: f32,
    /// 0 disables top-k.
    pub top_k: usize,
    /// In [0, 1]; 0 disables min-p.
    pub min_p: f32,
    /// Seeds this request's own RNG; `None` draws one from entropy.
    pub seed: Option<u64>,
    /// OpenAI semantics: subtracted once from the logit of every token already generated.
    pub presence_penalty: f32,
    /// OpenAI semantics: subtracted from a logit once per previous occurrence in the output.
    pub frequency_penalty: f32,
    /// CTRL / Hugging Face semantics over prompt and output tokens; 1 disables it.
    pub repetition_penalty: f32,
    /// New tokens to generate at most.
    pub max_tokens: usize,
    /// Keep generating past end-of-sequence tokens.
    pub ignore_eos: bool,
    /// Extra token ids that end the generation (besides the model's EOS ids).
    pub stop_token_ids: Vec<u32>,
    /// `logit_bias`, `min_tokens`, `allowed_token_ids`, `bad_words`: applied to the logits
    /// before any sampling rule. A request with any is sampled on the host.
    pub logit_rules: LogitRules,
    /// `Some(n)`: report each sampled token's logprob and the `n` most likely alternatives.
    pub logprobs: Option<usize>,
    /// `Some(n)`: report logprobs of every prompt token (the first has none), with `n` alternatives.
    pub prompt_logprobs: Option<usize>,
    /// Let the engine decode this request speculatively when it is configured to (the output
    /// distribution is the same either way; opting out only changes speed).
    pub allow_speculation: bool,
    /// Structured outputs: only tokens the constraint allows may be sampled (on the device
    /// where the backend applies token masks, else on the host); speculative drafts are
    /// checked against it too.
    pub constraint: Option<Constraint>,
    /// Scheduling priority under `SchedulingPolicy::Priority`: lower values are admitted
    /// first and preempted last (vLLM's `priority`; 0 by default).
    pub priority: i32,
    /// llama.cpp's `infill` sampler after the other filters (`/infill`'s `samplers`). Such a
    /// request is sampled on the host.
    pub infill: Option<InfillSampling>,
    /// OpenAI's `prediction`, tokenized: under speculative decoding, this request's drafts
    /// come from it (`speculative::prediction`) instead of the proposer.
    pub prediction: Option<Arc<[u32]>>,
}

impl SamplingParams {
    /// The ids that end a sequence with these params: the model's EOS (unless ignored) and
    /// the stop ids.
    pub fn end_token_ids(&self, eos_token_ids: &[u32]) -> Vec<u32> {
        let eos = eos_token_ids.iter().filter(|_| !self.ignore_eos);
        eos.chain(&self.stop_token_ids).copied().collect()
    }
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            temperature: 1.0,
            top_p: 1.0,
            top_k: 0,
            min_p: 0.0,
            seed: None,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            repetition_penalty: 1.0,
            max_tokens: 16,
            ignore_eos: false,
            stop_token_ids: Vec::new(),
            logit_rules: LogitRules::default(),
            logprobs: None,
            prompt_logprobs: None,
            allow_speculation: true,
            constraint: None,
            priority: 0,
            infill: None,
            prediction: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct GenerationRequest {
    pub id: RequestId,
    pub prompt: Vec<u32>,
    pub params: SamplingParams,
    pub arrival: Instant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// An EOS or stop token id was generated.
    Stop,
    /// `max_tokens` or the model's context length was reached.
    Length,
    /// The client went away or a stop string matched (the detokenizer asked to abort).
    Abort,
}

/// Log-probability of a token, with the most likely alternatives at that position.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprob {
    pub token: u32,
    pub logprob: f32,
    /// vLLM's rank: the tokens at least as likely as this one, itself included (1: the best).
    pub rank: u32,
    /// `(token, logprob)` in decreasing logprob order.
    pub top: Vec<(u32, f32)>,
}

/// Sent once per request, with its first output: facts about the prompt.
#[derive(Debug, Clone)]
pub struct PromptInfo {
    pub num_prompt_tokens: usize,
    /// Prompt tokens whose KV came from the prefix cache instead of being computed.
    pub num_cached_tokens: usize,
    /// One entry per prompt token (`None` for the first), when `prompt_logprobs` was asked for.
    pub prompt_logprobs: Option<Vec<Option<TokenLogprob>>>,
    /// When the request reached the engine's handle (as given in [`GenerationRequest`]).
    pub arrival: Instant,
    /// When the request was first admitted to the running batch (end of its queue time);
    /// `None` when it finished without ever running (aborted while waiting, refused).
    pub scheduled_at: Option<Instant>,
}

/// What one step produced for one request.
#[derive(Debug, Clone)]
pub struct EngineOutput {
    pub id: RequestId,
    /// `Some` in the first output of a request (the step that sampled its first token).
    pub prompt: Option<PromptInfo>,
    /// Tokens produced this step (one, normally; none for a finish without a token).
    pub tokens: Vec<u32>,
    /// One per entry of `tokens` when `logprobs` was asked for.
    pub logprobs: Vec<TokenLogprob>,
    pub finish: Option<FinishReason>,
    /// How the request's speculative decoding has gone so far (running totals, once it has
    /// speculated; with its finish, the whole request's): a request a stop string ends in the
    /// server still reports its drafts.
    pub speculation: Option<SpecSummary>,
}

/// What one scheduler step hands the server: its outputs, and facts about the step for metrics.
#[derive(Debug, Clone)]
pub struct EngineStep {
    pub outputs: Vec<EngineOutput>,
    /// `None` when no forward pass ran (the step only delivers aborts and refusals).
    pub stats: Option<StepStats>,
    /// When the outputs were ready: the time of every token of this step.
    pub at: Instant,
}
