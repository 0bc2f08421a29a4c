//! One tokenized prompt as engine requests (one per choice), and following them: the checks
//! of a prompt against the model and the waiting queue, the abort-on-drop guard, and
//! collecting deltas. Routes reach it through [`super::submit`].

use std::sync::Arc;

use ferrite_engine::{GenerationRequest, RequestId, SamplingParams};
use futures::stream::{self, BoxStream, StreamExt};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use super::logit_rules::check_min_tokens;
use super::usage_counter::UsageCounter;
use crate::app::state::AppState;
use crate::error::ApiError;
use crate::openai::sampling::ValidatedSampling;
use crate::openai::text_fields::keep_last;
use crate::openai::usage::Usage;
use crate::text::messages::{
    Delta, Finish, LogprobEntry, MatchedStop, PromptSummary, Registration,
};

/// Running choices of one HTTP request; dropping it aborts those not finished.
pub struct Submission {
    pub prompt_ids: Arc<Vec<u32>>,
    receivers: Vec<UnboundedReceiver<Delta>>,
    guard: AbortGuard,
    usage: UsageCounter,
}

struct AbortGuard {
    state: Arc<AppState>,
    ids: Vec<RequestId>,
    finished: Vec<bool>,
}

impl AbortGuard {
    fn mark_finished(&mut self, choice: usize) {
        if let Some(f) = self.finished.get_mut(choice) {
            *f = true;
        }
    }
}

impl Drop for AbortGuard {
    fn drop(&mut self) {
        for (id, done) in self.ids.iter().zip(&self.finished) {
            if !done {
                self.state.registry.unregister(*id);
                self.state.engine.abort(*id);
            }
        }
    }
}

/// What a choice amounted to, for non-streaming answers.
#[derive(Debug, Default)]
pub struct ChoiceResult {
    pub text: String,
    pub token_ids: Vec<u32>,
    pub logprobs: Vec<LogprobEntry>,
    pub prompt: Option<PromptSummary>,
    pub finish: Option<Finish>,
    /// The stop string or stop token id that finished it, if one did.
    pub stop_reason: Option<MatchedStop>,
}

impl ChoiceResult {
    pub fn absorb(&mut self, d: Delta) {
        self.text.push_str(&d.text);
        self.token_ids.extend_from_slice(&d.token_ids);
        self.logprobs.extend(d.logprobs);
        if d.prompt.is_some() {
            self.prompt = d.prompt;
        }
        if d.finish.is_some() {
            self.finish = d.finish;
            self.stop_reason = d.stop_reason;
        }
    }
}

/// Validates the prompt against the model and starts `sampling.n` engine requests for it.
pub(super) fn start_choices(
    state: &Arc<AppState>,
    mut prompt_ids: Vec<u32>,
    sampling: &ValidatedSampling,
    default_max_tokens: Option<usize>,
    prompt_logprobs: Option<usize>,
) -> Result<Submission, ApiError> {
    let max_len = state.engine.max_model_len();
    if let Some(truncation) = sampling.text.truncate_prompt_tokens {
        keep_last(&mut prompt_ids, truncation.keep(max_len)?);
    }
    if prompt_ids.is_empty() {
        return Err(ApiError::invalid_param("prompt", "the prompt is empty"));
    }
    if let Some(bad) = prompt_ids.iter().find(|&&t| t as usize >= state.vocab_size) {
        return Err(ApiError::invalid_param(
            "prompt",
            format!(
                "token id {bad} is out of range (vocabulary size {})",
                state.vocab_size
            ),
        ));
    }
    if prompt_ids.len() >= max_len {
        return Err(ApiError::invalid_param(
            "prompt",
            format!(
                "This model's maximum context length is {max_len} tokens. However, your prompt has {} tokens, which leaves no room for a completion.",
                prompt_ids.len()
            ),
        ));
    }
    let room = max_len - prompt_ids.len();
    // Asking for more than the context holds is a 400, as OpenAI and vLLM answer; a request
    // that leaves max_tokens out runs to the context's end ("length"), as vLLM's does.
    if let Some(asked) = sampling.max_tokens.filter(|&m| m > room) {
        let param = sampling.max_tokens_param;
        let n = prompt_ids.len();
        return Err(ApiError::invalid_param(
            param,
            format!(
                "`{param}` is too large: {asked}. This model's maximum context length is \
                 {max_len} tokens and your request has {n} input tokens \
                 ({asked} > {max_len} - {n})."
            ),
        ));
    }
    let max_tokens = sampling
        .max_tokens
        .or(default_max_tokens)
        .unwrap_or(room)
        .min(room);
    check_min_tokens(&sampling.params.logit_rules, max_tokens)?;
    let waiting = state.registry.len().saturating_sub(
        state
            .engine
            .stats()
            .num_running
            .load(std::sync::atomic::Ordering::Relaxed),
    );
    if waiting + sampling.n > state.max_waiting {
        return Err(ApiError::overloaded(format!(
            "the waiting queue is full ({} requests); retry later",
            state.max_waiting
        )));
    }
    let usage = UsageCounter::new(prompt_ids.len(), sampling.n)
        .with_prediction(sampling.params.prediction.is_some());
    let prompt_ids = Arc::new(prompt_ids);
    let mut guard = AbortGuard {
        state: Arc::clone(state),
        ids: Vec::with_capacity(sampling.n),
        finished: Vec::with_capacity(sampling.n),
    };
    let stop_token_ids = reported_stop_token_ids(&sampling.params, state.eos_token_id);
    let mut receivers = Vec::with_capacity(sampling.n);
    for i in 0..sampling.n {
        let id = state.next_request_id();
        let (sender, rx) = unbounded_channel();
        state.registry.register(
            id,
            Registration {
                prompt_ids: Arc::clone(&prompt_ids),
                stop: sampling.stop.clone(),
                stop_token_ids: stop_token_ids.clone(),
                skip_special_tokens: sampling.skip_special_tokens,
                spaces_between_special_tokens: sampling.text.spaces_between_special_tokens,
                include_stop_str: sampling.text.include_stop_str_in_output,
                sender,
            },
        );
        guard.ids.push(id);
        guard.finished.push(false);
        let params = SamplingParams {
            max_tokens,
            // Distinct but reproducible streams for the n choices of a seeded request.
            seed: sampling.params.seed.map(|s| s.wrapping_add(i as u64)),
            prompt_logprobs,
            ..sampling.params.clone()
        };
        crate::observe::traces::on_submit(id, &params, sampling.n);
        let request = GenerationRequest {
            id,
            prompt: prompt_ids.to_vec(),
            params,
            arrival: std::time::Instant::now(),
        };
        state
            .engine
            .add_request(request)
            .map_err(|e| ApiError::internal(format!("the engine refused the request: {e}")))?;
        receivers.push(rx);
    }
    Ok(Submission {
        prompt_ids,
        receivers,
        guard,
        usage,
    })
}

/// The request's `stop_token_ids` that name themselves in `stop_reason` when they end it: all
/// but the model's EOS token, which ends a request as EOS (no `stop_reason`, as vLLM answers)
/// unless the request ignores EOS.
fn reported_stop_token_ids(params: &SamplingParams, eos_token_id: Option<u32>) -> Vec<u32> {
    let ends_as_eos = |id: u32| !params.ignore_eos && Some(id) == eos_token_id;
    params
        .stop_token_ids
        .iter()
        .copied()
        .filter(|&id| !ends_as_eos(id))
        .collect()
}

impl Submission {
    /// One submission per prompt of a multi-prompt completion, as one list of choices.
    pub(super) fn concat(parts: Vec<Submission>) -> Option<Submission> {
        let mut iter = parts.into_iter();
        let mut all = iter.next()?;
        for mut part in iter {
            all.receivers.append(&mut part.receivers);
            all.guard.ids.append(&mut part.guard.ids);
            all.guard.finished.append(&mut part.guard.finished);
            all.usage.append(part.usage);
        }
        Some(all)
    }

    pub fn num_choices(&self) -> usize {
        self.receivers.len()
    }

    /// Waits for every choice to finish (non-streaming answers).
    pub async fn collect(self) -> Result<(Vec<ChoiceResult>, Usage), ApiError> {
        let mut results: Vec<ChoiceResult> = Vec::new();
        results.resize_with(self.receivers.len(), ChoiceResult::default);
        let mut running = self.run();
        while let Some((i, delta)) = running.next().await {
            results[i].absorb(delta);
        }
        if results.iter().any(|r| r.finish.is_none()) {
            return Err(ApiError::internal("a generation ended without finishing"));
        }
        Ok((results, running.usage()))
    }

    /// Follows the choices as they run (streaming answers).
    pub fn run(self) -> RunningChoices {
        RunningChoices {
            deltas: merge(self.receivers),
            guard: self.guard,
            usage: self.usage,
        }
    }
}

/// The deltas of a submission's choices as they come; dropping it aborts the unfinished ones.
pub struct RunningChoices {
    deltas: BoxStream<'static, (usize, Delta)>,
    guard: AbortGuard,
    usage: UsageCounter,
}

impl RunningChoices {
    /// The next delta of any choice, with the choice's index; `None` once all finished.
    pub async fn next(&mut self) -> Option<(usize, Delta)> {
        let (i, delta) = self.deltas.next().await?;
        if delta.finish.is_some() {
            self.guard.mark_finished(i);
        }
        self.usage.observe(i, &delta);
        Some((i, delta))
    }

    /// The usage of what came so far (all of it once [`Self::next`] returned `None`).
    pub fn usage(&self) -> Usage {
        self.usage.usage()
    }
}

fn merge(receivers: Vec<UnboundedReceiver<Delta>>) -> BoxStream<'static, (usize, Delta)> {
    let streams = receivers.into_iter().enumerate().map(|(i, rx)| {
        stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|d| (d, rx)) })
            .map(move |d| (i, d))
            .boxed()
    });
    stream::select_all(streams).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eos_token_is_reported_as_a_stop_token_only_when_eos_is_ignored() {
        let params = |ignore_eos| SamplingParams {
            stop_token_ids: vec![5, 2, 9],
            ignore_eos,
            ..SamplingParams::default()
        };
        assert_eq!(reported_stop_token_ids(&params(false), Some(2)), vec![5, 9]);
        assert_eq!(
            reported_stop_token_ids(&params(true), Some(2)),
            vec![5, 2, 9]
        );
        assert_eq!(reported_stop_token_ids(&params(false), None), vec![5, 2, 9]);
    }
}
