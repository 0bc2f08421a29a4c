//! `POST /infill`: llama-server's code-completion endpoint, for editor plugins (llama.vim,
//! llama.vscode). The prompt is `text::infill_prompt`'s; the request's fields are checked by
//! `llama_server::infill`; the answer is llama-server's format (`llama_server::result`), whole
//! or streamed, with its `n_indent` and `t_max_predict_ms` stops (`llama_server::early_stop`).

use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::event_pump::{json_event, stream_response, EventSource, Outgoing};
use crate::app::state::AppState;
use crate::error::ApiError;
use crate::generation::submission::RunningChoices;
use crate::generation::submit::{submit, PromptTokens, SubmitOptions, Submitted};
use crate::json_body::JsonBody;
use crate::llama_server::early_stop::{EarlyStop, Stopped};
use crate::llama_server::infill::InfillRequest;
use crate::llama_server::result::{select, InfillPartial, InfillResult, Timings};
use crate::text::fim::FimTokens;
use crate::text::infill_prompt::{
    infill_batch, infill_prompt, InfillBudget, InfillParts, CURRENT_FILE, REPO_NAME,
    SNIPPET_SEPARATOR,
};
use crate::text::messages::{Finish, MatchedStop};

pub async fn infill(
    State(state): State<Arc<AppState>>,
    JsonBody(req): JsonBody<InfillRequest>,
) -> Result<Response, ApiError> {
    state.check_model(req.model.as_deref())?;
    let plan = req.plan()?;
    let Some(fim) = state.fim else {
        return Err(ApiError::bad_request(
            "/infill needs a model with fill-in-the-middle tokens (<|fim_prefix|>, <fim_prefix> \
             or <｜fim▁begin｜>); this model's tokenizer has none",
        ));
    };
    let mut sampling = plan.sampling.validate(None, &state.sampling_defaults)?;
    if plan.infill_sampler {
        sampling.params.infill = state.infill_sampling.clone();
    }
    let context = state.engine.max_model_len();
    let budget = InfillBudget {
        batch: infill_batch(context),
        context,
        n_predict: plan.n_predict.unwrap_or(0),
    };
    let started = Instant::now();
    let prompt = tokenize(&state, &req, fim, budget);
    let Submitted {
        prompt: InfillIds(ids),
        submission,
    } = submit(&state, prompt, &mut sampling, SubmitOptions::default()).await?;
    let mut run = InfillRun {
        choices: Some(submission.run()),
        stop: EarlyStop::new(plan.n_indent, plan.t_max_predict_ms),
        prompt_only: plan.n_predict == Some(0),
        return_tokens: req.return_tokens,
        model: state.model_name.clone(),
        num_prompt_tokens: ids.len(),
        num_cached: 0,
        text: String::new(),
        tokens: Vec::new(),
        started,
        first_token: None,
        last_token: started,
        ended: None,
    };
    let fields = req.response_fields;
    if sampling.stream {
        return Ok(stream_response(InfillStream {
            run,
            fields,
            done: false,
        }));
    }
    while run.next_piece().await.is_some() {}
    Ok(Json(run.result(fields.as_deref(), false)).into_response())
}

/// The prompt's token ids, as `submit` takes them.
struct InfillIds(Vec<u32>);

impl PromptTokens for InfillIds {
    fn token_ids(&self) -> Vec<&[u32]> {
        vec![&self.0]
    }
}

async fn tokenize(
    state: &AppState,
    req: &InfillRequest,
    fim: FimTokens,
    budget: InfillBudget,
) -> Result<InfillIds, ApiError> {
    let encode = |text: String| state.tokenizers.encode(text, false);
    let mut extra = Vec::with_capacity(req.input_extra.len());
    for chunk in &req.input_extra {
        let name = match fim.repo {
            Some(_) => format!("{}\n", chunk.filename),
            None => SNIPPET_SEPARATOR.to_string(),
        };
        extra.push((encode(name).await?, encode(chunk.text.clone()).await?));
    }
    let parts = InfillParts {
        lead: state.tokenizers.encode(String::new(), true).await?,
        prefix: encode(req.input_prefix.clone()).await?,
        suffix: encode(req.input_suffix.clone()).await?,
        prompt: encode(req.prompt.clone()).await?,
        extra,
        repo_name: encode(REPO_NAME.into()).await?,
        current_file: encode(CURRENT_FILE.into()).await?,
    };
    Ok(InfillIds(infill_prompt(&fim, &parts, budget)))
}

/// How the completion ended: llama-server's `stop_type` and `stopping_word`.
#[derive(Debug, Clone)]
struct Ended {
    stop_type: &'static str,
    stopping_word: String,
}

/// One running infill: the text so far and the stops llama-server applies to it.
struct InfillRun {
    /// `None` once ended: dropping the running request aborts it if it has not finished.
    choices: Option<RunningChoices>,
    stop: EarlyStop,
    /// `n_predict` 0: the prompt is read, the token that follows is dropped.
    prompt_only: bool,
    return_tokens: bool,
    model: String,
    num_prompt_tokens: usize,
    num_cached: usize,
    text: String,
    tokens: Vec<u32>,
    started: Instant,
    first_token: Option<Instant>,
    last_token: Instant,
    ended: Option<Ended>,
}

impl InfillRun {
    /// The next piece of text (and its token ids, with `return_tokens`); `None` once the
    /// completion ended.
    async fn next_piece(&mut self) -> Option<(String, Vec<u32>)> {
        let choices = self.choices.as_mut()?;
        let Some((_, delta)) = choices.next().await else {
            self.end("limit", String::new());
            return None;
        };
        let now = Instant::now();
        if let Some(prompt) = &delta.prompt {
            self.num_cached = prompt.num_cached_tokens;
        }
        if !delta.token_ids.is_empty() {
            self.first_token.get_or_insert(now);
            self.last_token = now;
        }
        if self.prompt_only {
            self.end("limit", String::new());
            return None;
        }
        let before = self.text.len();
        self.text.push_str(&delta.text);
        self.tokens.extend_from_slice(&delta.token_ids);
        let mut piece = delta.text;
        match self.stop.check(&self.text, now) {
            Some(Stopped::Indent(end)) => {
                self.text.truncate(end);
                piece.truncate(end.saturating_sub(before));
                self.end("limit", String::new());
            }
            Some(Stopped::Timeout) => self.end("limit", String::new()),
            None => match (delta.finish, delta.stop_reason) {
                (Some(Finish::Stop), Some(MatchedStop::Text(word))) => self.end("word", word),
                (Some(Finish::Stop), _) => self.end("eos", String::new()),
                (Some(_), _) => self.end("limit", String::new()),
                (None, _) => {}
            },
        }
        let ids = match self.return_tokens {
            true => delta.token_ids,
            false => Vec::new(),
        };
        Some((piece, ids))
    }

    fn end(&mut self, stop_type: &'static str, stopping_word: String) {
        self.ended.get_or_insert(Ended {
            stop_type,
            stopping_word,
        });
        self.choices = None;
    }

    fn tokens_predicted(&self) -> usize {
        if self.prompt_only {
            0
        } else {
            self.tokens.len()
        }
    }

    /// The whole result; `fields`: llama-server's `response_fields`; `streamed`: its text and
    /// tokens went out in the partials already (llama-server's last event leaves them empty).
    fn result(&self, fields: Option<&[String]>, streamed: bool) -> serde_json::Value {
        let ended = self.ended.clone().unwrap_or(Ended {
            stop_type: "none",
            stopping_word: String::new(),
        });
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let first = self.first_token.unwrap_or(self.last_token);
        let mut timings = Timings::new(
            self.num_prompt_tokens.saturating_sub(self.num_cached),
            ms(first.saturating_duration_since(self.started)),
            self.tokens_predicted(),
            ms(self.last_token.saturating_duration_since(first)),
        );
        timings.cache_n = self.num_cached;
        let result = InfillResult {
            index: 0,
            content: if streamed {
                String::new()
            } else {
                self.text.clone()
            },
            tokens: if self.return_tokens && !streamed {
                self.tokens.clone()
            } else {
                Vec::new()
            },
            stop: true,
            model: self.model.clone(),
            tokens_predicted: self.tokens_predicted(),
            tokens_evaluated: self.num_prompt_tokens,
            tokens_cached: self.num_cached,
            has_new_line: self.text.contains('\n'),
            truncated: false,
            stop_type: ended.stop_type,
            stopping_word: ended.stopping_word,
            timings,
        };
        let value = serde_json::to_value(&result).unwrap_or_default();
        match fields {
            Some(fields) => select(&value, fields),
            None => value,
        }
    }
}

/// A streamed infill: a partial per piece of text, then the whole result.
struct InfillStream {
    run: InfillRun,
    fields: Option<Vec<String>>,
    done: bool,
}

impl EventSource for InfillStream {
    async fn next_events(&mut self) -> Option<Vec<Outgoing>> {
        if self.done {
            return None;
        }
        if self.run.ended.is_none() {
            if let Some((content, tokens)) = self.run.next_piece().await {
                let partial = InfillPartial {
                    index: 0,
                    content,
                    tokens,
                    stop: false,
                    tokens_predicted: self.run.tokens_predicted(),
                    tokens_evaluated: self.run.num_prompt_tokens,
                };
                return Some(vec![json_event(None, &partial)]);
            }
        }
        self.done = true;
        let last = self.run.result(self.fields.as_deref(), true);
        Some(vec![json_event(None, &last)])
    }
}
