//! Requests run through a whole engine (scheduler, prefix cache, speculation): greedy, EOS
//! ignored, with their tokens' log-probabilities and how far each choice was from the
//! runner-up.

use ferrite_engine::{EngineCore, GenerationRequest, SamplingParams};

/// (tokens, their log-probabilities, cached prompt tokens, each token's log-probability less
/// the runner-up's) of each request.
pub type Outcome = Vec<(Vec<u32>, Vec<f32>, usize, Vec<f32>)>;

/// Adds `prompts` as requests `first_id..` (each `max_tokens` long) and steps the engine
/// until it is idle.
pub fn run_greedy(
    core: &mut EngineCore,
    first_id: u64,
    prompts: &[Vec<u32>],
    max_tokens: usize,
) -> Outcome {
    for (i, prompt) in prompts.iter().enumerate() {
        core.add_request(GenerationRequest {
            id: first_id + i as u64,
            prompt: prompt.clone(),
            params: SamplingParams {
                temperature: 0.0,
                max_tokens,
                ignore_eos: true,
                // The two most likely tokens: the choice's margin over the other.
                logprobs: Some(2),
                ..SamplingParams::default()
            },
            arrival: std::time::Instant::now(),
        });
    }
    let mut out: Outcome = vec![Default::default(); prompts.len()];
    while core.has_work() {
        for o in core.step() {
            let entry = &mut out[(o.id - first_id) as usize];
            if let Some(info) = &o.prompt {
                entry.2 = info.num_cached_tokens;
            }
            entry.0.extend(&o.tokens);
            entry.1.extend(o.logprobs.iter().map(|l| l.logprob));
            entry.3.extend(o.logprobs.iter().map(|l| {
                let runner_up = l.top.iter().find(|(t, _)| *t != l.token);
                l.logprob - runner_up.map_or(f32::NEG_INFINITY, |&(_, lp)| lp)
            }));
        }
    }
    out
}
