//! `POST /v1/completions`.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::answer::{respond, AnswerShape, ChunkFormatter, ChunkPart};
use super::beam_answer::{self, beam_options, refuse_lone_length_penalty};
use super::request_id::adopt_body_request_id;
use crate::app::state::AppState;
use crate::error::ApiError;
use crate::generation::best_of;
use crate::generation::submission::ChoiceResult;
use crate::generation::submit::{submit, PromptTokens, SubmitOptions, Submitted};
use crate::json_body::JsonBody;
use crate::openai::completions::{CompletionRequest, Prompt};
use crate::openai::logprobs::LegacyLogprobs;
use crate::openai::prompt_logprobs::PromptLogprobs;
use crate::openai::response::{Completion, CompletionChoice, ResponseMeta};
use crate::openai::sampling::check_top_logprobs;
use crate::openai::text_fields::keep_last;
use crate::openai::usage::Usage;
use crate::text::fim::FimTokens;
use crate::text::messages::{Delta, Finish, LogprobEntry, MatchedStop, PromptSummary};

/// OpenAI's default for completions.
const DEFAULT_MAX_TOKENS: usize = 16;

/// A prompt as tokenized, with the text `echo` repeats.
struct TokenizedPrompt {
    text: String,
    ids: Vec<u32>,
}

pub async fn completions(
    State(state): State<Arc<AppState>>,
    JsonBody(req): JsonBody<CompletionRequest>,
) -> Result<Response, ApiError> {
    adopt_body_request_id(req.request_id.as_deref())?;
    state.check_model(req.model.as_deref())?;
    req.refuse_unimplemented()?;
    let logprobs = req
        .logprobs
        .map(|n| check_top_logprobs("logprobs", n))
        .transpose()?;
    let mut sampling = req.sampling.validate(logprobs, &state.sampling_defaults)?;
    let n = sampling.n;
    let best_of = best_of::candidates(req.best_of, n, sampling.stream)?;
    if let Some(candidates) = best_of {
        // Every candidate's token logprobs, to rank them by.
        sampling.n = candidates;
        sampling.params.logprobs.get_or_insert(0);
    }
    let options = SubmitOptions {
        grammar: req.structured.grammar()?,
        default_max_tokens: Some(DEFAULT_MAX_TOKENS),
        prompt_logprobs: if req.echo { logprobs } else { None },
    };
    let keep = sampling
        .text
        .truncate_prompt_tokens
        .map(|t| t.keep(state.engine.max_model_len()))
        .transpose()?;
    let how_suffix = req.suffix.is_some();
    let how = Tokenize {
        echo: req.echo,
        add_special_tokens: req.add_special_tokens.unwrap_or(true),
        keep,
        suffix: fim_suffix(&state, req.suffix, req.echo, keep)?,
    };
    let prompts = tokenize(&state, req.prompt.into_prompts(), how);
    if req.use_beam_search {
        let conflicts = [
            ("logprobs", logprobs.is_some()),
            ("echo", req.echo),
            ("suffix", how_suffix),
            ("best_of", best_of.is_some()),
            ("response_format", options.grammar.is_some()),
        ];
        let beam_options = beam_options(
            &state,
            &sampling,
            req.length_penalty,
            Some(DEFAULT_MAX_TOKENS),
            &conflicts,
        )?;
        let prompts = prompts.await?;
        let ids: Vec<Vec<u32>> = prompts.0.iter().map(|p| p.ids.clone()).collect();
        let meta = ResponseMeta::new(
            format!("cmpl-{}", state.client_request_id()),
            state.model_name.clone(),
        );
        let shape = Shape {
            n,
            echo: false,
            logprobs: None,
            prompt_logprobs: None,
            return_token_ids: sampling.return_token_ids,
            prompts: prompts.0,
        };
        let complete = beam_answer::answer(&state, &ids, &sampling, beam_options, meta, shape);
        return Ok(Json(complete.await?).into_response());
    }
    refuse_lone_length_penalty(req.length_penalty)?;
    let Submitted {
        prompt: TokenizedPrompts(prompts),
        submission,
    } = submit(&state, prompts, &mut sampling, options).await?;
    let meta = ResponseMeta::new(
        format!("cmpl-{}", state.client_request_id()),
        state.model_name.clone(),
    );
    let shape = Shape {
        n,
        echo: req.echo,
        logprobs,
        prompt_logprobs: sampling.prompt_logprobs,
        return_token_ids: sampling.return_token_ids,
        prompts,
    };
    if let Some(candidates) = best_of {
        let (results, usage) = submission.collect().await?;
        let best = best_of::keep_best(results, candidates, n);
        return Ok(Json(shape.complete(meta, best, usage)).into_response());
    }
    respond(submission, meta, &sampling, shape).await
}

/// The request's prompts, each tokenized (and its text kept for `echo`).
struct TokenizedPrompts(Vec<TokenizedPrompt>);

impl PromptTokens for TokenizedPrompts {
    fn token_ids(&self) -> Vec<&[u32]> {
        self.0.iter().map(|p| p.ids.as_slice()).collect()
    }
}

/// How the prompts are tokenized.
struct Tokenize {
    echo: bool,
    add_special_tokens: bool,
    /// `truncate_prompt_tokens`: the prompt tokens kept (the last ones).
    keep: Option<usize>,
    /// Fill in the middle: the model's FIM tokens and the `suffix` text.
    suffix: Option<(FimTokens, String)>,
}

/// `suffix`, checked: a model with FIM tokens, and neither `echo` (the prompt the model reads
/// is not the text before the completion) nor `truncate_prompt_tokens` (it would cut the
/// markers) beside it.
fn fim_suffix(
    state: &AppState,
    suffix: Option<String>,
    echo: bool,
    keep: Option<usize>,
) -> Result<Option<(FimTokens, String)>, ApiError> {
    let Some(suffix) = suffix else {
        return Ok(None);
    };
    let refuse = |why: &str| Err(ApiError::invalid_param("suffix", why));
    let Some(fim) = state.fim else {
        return refuse(
            "`suffix` needs a model with fill-in-the-middle tokens (<|fim_prefix|>, \
             <fim_prefix> or <｜fim▁begin｜>); this model's tokenizer has none",
        );
    };
    if echo {
        return refuse("`suffix` and `echo` cannot be combined");
    }
    if keep.is_some() {
        return refuse("`suffix` and `truncate_prompt_tokens` cannot be combined");
    }
    Ok(Some((fim, suffix)))
}

/// Tokenizes text prompts and cuts them to `truncate_prompt_tokens`. `echo` repeats the
/// prompt the model read: a text prompt's text, or the decoded ids of a token-id prompt or of
/// a cut one (only when every id is in the vocabulary: the submission refuses the others).
async fn tokenize(
    state: &AppState,
    prompts: Vec<Prompt>,
    how: Tokenize,
) -> Result<TokenizedPrompts, ApiError> {
    let mut tokenized = Vec::with_capacity(prompts.len());
    for p in prompts {
        let (text, mut ids) = match (p, &how.suffix) {
            (Prompt::Text(text), None) => {
                let ids = state
                    .tokenizers
                    .encode(text.clone(), how.add_special_tokens)
                    .await?;
                (Some(text), ids)
            }
            (Prompt::Ids(ids), None) => (None, ids),
            (prompt, Some((fim, suffix))) => {
                // What the tokenizer puts before any text (a BOS), then the FIM prompt.
                let encode = |t: String, special| state.tokenizers.encode(t, special);
                let lead = match how.add_special_tokens {
                    true => encode(String::new(), true).await?,
                    false => Vec::new(),
                };
                let prefix = match prompt {
                    Prompt::Text(text) => encode(text, false).await?,
                    Prompt::Ids(ids) => ids,
                };
                let suffix = encode(suffix.clone(), false).await?;
                (None, fim.prompt(&lead, &prefix, &suffix))
            }
        };
        let full = ids.len();
        if let Some(keep) = how.keep {
            keep_last(&mut ids, keep);
        }
        let text = match text {
            Some(text) if ids.len() == full => text,
            _ if how.echo && ids.iter().all(|&t| (t as usize) < state.vocab_size) => {
                state.tokenizers.decode(ids.clone(), false).await?
            }
            _ => String::new(),
        };
        tokenized.push(TokenizedPrompt { text, ids });
    }
    Ok(TokenizedPrompts(tokenized))
}

/// What shapes the answer, shared by the streaming and the complete form.
struct Shape {
    n: usize,
    echo: bool,
    /// `logprobs`: alternatives per token.
    logprobs: Option<usize>,
    /// vLLM's `prompt_logprobs` (never with `stream`).
    prompt_logprobs: Option<usize>,
    return_token_ids: bool,
    prompts: Vec<TokenizedPrompt>,
}

impl Shape {
    fn prompt_of(&self, choice: usize) -> &TokenizedPrompt {
        &self.prompts[(choice / self.n.max(1)).min(self.prompts.len() - 1)]
    }

    /// A choice's text in one answer part: the echoed prompt first in the part that starts
    /// the choice, then the generated text; their tokens' logprobs go into `lp`.
    fn text(
        &self,
        choice: usize,
        starts_choice: bool,
        prompt: Option<&PromptSummary>,
        generated: &str,
        logprobs: &[LogprobEntry],
        lp: &mut LegacyLogprobs,
    ) -> String {
        let mut text = String::new();
        if starts_choice {
            text = self.echo_part(choice, prompt, lp);
            lp.next_offset = text.len();
        }
        for e in logprobs {
            lp.push(&e.token, Some(e));
        }
        text.push_str(generated);
        text
    }

    /// The echoed prompt: its text, and its tokens' logprobs when asked for.
    fn echo_part(
        &self,
        choice: usize,
        prompt: Option<&PromptSummary>,
        lp: &mut LegacyLogprobs,
    ) -> String {
        if !self.echo {
            return String::new();
        }
        if let Some(entries) = prompt.and_then(|p| p.prompt_logprobs.as_ref()) {
            // `prompt_logprobs` may have asked for more alternatives than `logprobs`.
            let n = self.logprobs.unwrap_or(0);
            for (token, entry) in entries {
                let entry = entry.as_ref().map(|e| LogprobEntry {
                    top: e.top.iter().take(n).cloned().collect(),
                    ..e.clone()
                });
                lp.push(token, entry.as_ref());
            }
        }
        self.prompt_of(choice).text.clone()
    }

    /// One choice, whole or one chunk's part; `with_prompt_ids` puts the prompt's token ids in
    /// when the client asked for `return_token_ids`.
    fn choice(
        &self,
        index: usize,
        text: String,
        lp: &mut LegacyLogprobs,
        (finish, stop_reason): (Option<Finish>, Option<MatchedStop>),
        with_prompt_ids: bool,
        token_ids: Vec<u32>,
    ) -> CompletionChoice {
        let ids = self.return_token_ids;
        CompletionChoice {
            index,
            text,
            logprobs: self.logprobs.is_some().then(|| lp.take()),
            finish_reason: finish.map(Finish::as_openai),
            stop_reason,
            prompt_token_ids: (ids && with_prompt_ids).then(|| self.prompt_of(index).ids.clone()),
            token_ids: ids.then_some(token_ids),
            prompt_logprobs: None,
        }
    }
}

impl AnswerShape for Shape {
    type Complete = Completion;
    type Chunks = CompletionChunks;

    fn complete(self, meta: ResponseMeta, results: Vec<ChoiceResult>, usage: Usage) -> Completion {
        let choices = results
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let mut lp = LegacyLogprobs::starting_at(0);
                let text = self.text(i, true, r.prompt.as_ref(), &r.text, &r.logprobs, &mut lp);
                let prompt_logprobs = self.prompt_logprobs.and_then(|n| {
                    let entries = r.prompt.as_ref()?.prompt_logprobs.as_ref()?;
                    Some(PromptLogprobs::new(entries, n))
                });
                CompletionChoice {
                    prompt_logprobs,
                    ..self.choice(
                        i,
                        text,
                        &mut lp,
                        (r.finish, r.stop_reason),
                        true,
                        r.token_ids,
                    )
                }
            })
            .collect();
        Completion::new(meta, choices, usage)
    }

    fn into_chunks(self, num_choices: usize) -> CompletionChunks {
        CompletionChunks {
            logprobs: (0..num_choices)
                .map(|_| LegacyLogprobs::default())
                .collect(),
            shape: self,
        }
    }
}

struct CompletionChunks {
    shape: Shape,
    /// Per choice: the offsets run on from one chunk to the next.
    logprobs: Vec<LegacyLogprobs>,
}

impl ChunkFormatter for CompletionChunks {
    type Choice = CompletionChoice;

    fn on_delta(&mut self, i: usize, delta: Delta) -> Vec<ChunkPart<CompletionChoice>> {
        let Some(lp) = self.logprobs.get_mut(i) else {
            return Vec::new();
        };
        let prompt = delta.prompt.as_ref();
        let text = self.shape.text(
            i,
            prompt.is_some(),
            prompt,
            &delta.text,
            &delta.logprobs,
            lp,
        );
        let choice = self.shape.choice(
            i,
            text,
            lp,
            (delta.finish, delta.stop_reason),
            prompt.is_some(),
            delta.token_ids,
        );
        vec![ChunkPart::new(choice)]
    }
}
