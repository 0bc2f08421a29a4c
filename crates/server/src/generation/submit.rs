//! The one way a route's request reaches the engine, whichever API it came from: the prompt is
//! prepared (tokenized, or rendered with the chat template) while the requested output
//! constraint compiles and the bad words are tokenized, the constraint and the logit rules
//! join the sampling parameters, and each prompt is checked against the model and started as
//! `n` engine requests. A route maps only its own API's
//! fields onto this: the prompt it prepares, its sampling and [`SubmitOptions`].

use std::future::Future;
use std::sync::Arc;

use ferrite_engine::SchedulingPolicy;

use super::logit_rules::{check_vocabulary, tokenize_bad_words};
use super::submission::{start_choices, Submission};
use crate::app::state::AppState;
use crate::error::ApiError;
use crate::openai::sampling::ValidatedSampling;
use crate::openai::structured::RequestedGrammar;
use crate::text::tokenizer_pool::ChatPrompt;

/// How a request runs besides its prompt and its sampling fields.
#[derive(Debug, Default)]
pub struct SubmitOptions {
    /// The output constraint the request asked for; it compiles while the prompt is prepared.
    pub grammar: Option<RequestedGrammar>,
    /// `max_tokens` for a request that leaves it out; `None`: up to the end of the context.
    pub default_max_tokens: Option<usize>,
    /// The logprobs of the prompt's own tokens (completions' `echo` with `logprobs`).
    pub prompt_logprobs: Option<usize>,
}

/// A prepared prompt: the token ids of each prompt it holds (a completion may send several,
/// each getting its own `n` choices, in order).
pub trait PromptTokens {
    fn token_ids(&self) -> Vec<&[u32]>;
}

impl PromptTokens for ChatPrompt {
    fn token_ids(&self) -> Vec<&[u32]> {
        vec![&self.ids]
    }
}

/// The prompt as the route prepared it (for its answer), and its running engine requests.
pub struct Submitted<P> {
    pub prompt: P,
    pub submission: Submission,
}

/// Prepares the prompt while the grammar compiles, puts the constraint into `sampling`, and
/// starts `sampling.n` engine requests per prompt. An error preparing the prompt is reported
/// before one compiling the grammar; a prompt list that turns out empty is a 400.
pub async fn submit<P: PromptTokens>(
    state: &Arc<AppState>,
    prompt: impl Future<Output = Result<P, ApiError>>,
    sampling: &mut ValidatedSampling,
    options: SubmitOptions,
) -> Result<Submitted<P>, ApiError> {
    check_priority(sampling.params.priority, state.engine.scheduling_policy())?;
    let grammars = &state.grammars;
    let (prompt, constraint, bad_words) = tokio::join!(
        prompt,
        async {
            match options.grammar {
                Some(g) => grammars.constraint(g).await.map(Some),
                None => Ok(None),
            }
        },
        tokenize_bad_words(&state.tokenizers, &sampling.bad_words)
    );
    let prompt = prompt?;
    sampling.params.constraint = constraint?;
    sampling.params.logit_rules.bad_words = bad_words?;
    check_vocabulary(&sampling.params.logit_rules, state.vocab_size)?;
    let mut parts = Vec::new();
    for ids in prompt.token_ids() {
        parts.push(start_choices(
            state,
            ids.to_vec(),
            sampling,
            options.default_max_tokens,
            // Completions' echo may ask for them too: the more alternatives of the two.
            options.prompt_logprobs.max(sampling.prompt_logprobs),
        )?);
    }
    let submission = Submission::concat(parts)
        .ok_or_else(|| ApiError::invalid_param("prompt", "the prompt is empty"))?;
    Ok(Submitted { prompt, submission })
}

/// A `priority` means something only under `--scheduling-policy priority`: elsewhere a nonzero
/// one is refused rather than ignored (vLLM's rule).
fn check_priority(priority: i32, policy: SchedulingPolicy) -> Result<(), ApiError> {
    if priority != 0 && policy != SchedulingPolicy::Priority {
        return Err(ApiError::invalid_param(
            "priority",
            format!(
                "`priority` {priority} needs priority scheduling: start the server with \
                 --scheduling-policy priority"
            ),
        ));
    }
    Ok(())
}
