//! `use_beam_search` (completions and chat): the request checked for what beam search can
//! honour, each prompt's beams found (`generation::beam_search`), and the `n` beams answered
//! as choices, best first, in the endpoint's shape.

use std::sync::Arc;

use super::answer::AnswerShape;
use crate::app::state::AppState;
use crate::error::ApiError;
use crate::generation::beam_search::{beam_search, BeamOptions};
use crate::generation::submission::ChoiceResult;
use crate::openai::response::ResponseMeta;
use crate::openai::sampling::ValidatedSampling;
use crate::openai::usage::Usage;
use crate::text::messages::Finish;

/// The search's options, or the 400 for the first field beam search cannot honour (vLLM's
/// beam search takes the same few: `n` beams, `max_tokens`, `ignore_eos`, `length_penalty`).
/// `also`: the endpoint's own fields that conflict, and whether the request set them.
pub fn beam_options(
    state: &AppState,
    sampling: &ValidatedSampling,
    length_penalty: Option<f64>,
    default_max_tokens: Option<usize>,
    also: &[(&'static str, bool)],
) -> Result<BeamOptions, ApiError> {
    let common = [
        ("stream", sampling.stream),
        (
            "stop",
            !sampling.stop.is_empty() || !sampling.params.stop_token_ids.is_empty(),
        ),
        ("prompt_logprobs", sampling.prompt_logprobs.is_some()),
        ("logit_bias", !sampling.params.logit_rules.is_empty()),
    ];
    if let Some((field, _)) = common.iter().chain(also).find(|(_, set)| *set) {
        return Err(ApiError::invalid_param(
            field,
            format!("`{field}` cannot be combined with `use_beam_search`"),
        ));
    }
    let length_penalty = length_penalty.unwrap_or(1.0);
    if !length_penalty.is_finite() {
        return Err(ApiError::invalid_param(
            "length_penalty",
            "length_penalty must be a finite number",
        ));
    }
    let max_tokens = sampling
        .max_tokens
        .or(default_max_tokens)
        .unwrap_or_else(|| state.engine.max_model_len());
    Ok(BeamOptions {
        width: sampling.n,
        max_tokens,
        length_penalty,
        ignore_eos: sampling.params.ignore_eos,
        eos: state.eos_token_id,
    })
}

/// `length_penalty` without `use_beam_search`: a 400, since it would change nothing.
pub fn refuse_lone_length_penalty(length_penalty: Option<f64>) -> Result<(), ApiError> {
    match length_penalty {
        Some(_) => Err(ApiError::invalid_param(
            "length_penalty",
            "`length_penalty` applies to beam search only (`use_beam_search: true`)",
        )),
        None => Ok(()),
    }
}

/// Each prompt's beams as `n` choices, best first, in the shape's complete answer.
pub async fn answer<S: AnswerShape>(
    state: &Arc<AppState>,
    prompts: &[Vec<u32>],
    sampling: &ValidatedSampling,
    options: BeamOptions,
    meta: ResponseMeta,
    shape: S,
) -> Result<S::Complete, ApiError> {
    let (mut results, mut generated) = (Vec::new(), 0);
    for prompt in prompts {
        // The beams grow to the end of the context at most; a `max_tokens` past it is the
        // same 400 as without beam search.
        let room = state.engine.max_model_len().saturating_sub(prompt.len());
        if sampling.max_tokens.is_some_and(|m| m > room) {
            return Err(ApiError::invalid_param(
                sampling.max_tokens_param,
                format!(
                    "{} is more than the {room} tokens this prompt leaves of the model's \
                     context ({})",
                    sampling.max_tokens_param,
                    state.engine.max_model_len()
                ),
            ));
        }
        let options = BeamOptions {
            max_tokens: options.max_tokens.min(room),
            ..options
        };
        let beams = beam_search(state, prompt, sampling, options).await?;
        if beams.len() < options.width {
            return Err(ApiError::internal(
                "beam search found fewer beams than asked",
            ));
        }
        for beam in beams {
            generated += beam.tokens.len();
            let text = state
                .tokenizers
                .decode(beam.tokens.clone(), sampling.skip_special_tokens)
                .await?;
            results.push(ChoiceResult {
                text,
                token_ids: beam.tokens,
                finish: Some(if beam.ended {
                    Finish::Stop
                } else {
                    Finish::Length
                }),
                ..ChoiceResult::default()
            });
        }
    }
    let prompt_tokens = prompts.iter().map(Vec::len).sum();
    Ok(shape.complete(meta, results, Usage::new(prompt_tokens, generated, 0)))
}
