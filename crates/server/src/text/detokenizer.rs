//! The detokenizer thread: turns each engine step's token ids into text deltas for the HTTP
//! side, matches stop strings, aborts requests whose client went away, and follows every
//! request's timeline for the metrics and the request log ([`RequestTracker`]).

use std::collections::HashMap;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex, MutexGuard};

use ferrite_engine::{EngineOutput, EngineStep, FinishReason, RequestId, TokenLogprob};
use tokenizers::Tokenizer;
use tokio::sync::mpsc::UnboundedSender;

use crate::observe::request_tracker::RequestTracker;
use crate::text::incremental::IncrementalDecoder;
use crate::text::messages::{
    Delta, Finish, LogprobEntry, MatchedStop, PromptSummary, Registration,
};
use crate::text::stop_strings::{StopCheck, StopMatcher};
use crate::text::token_text::TokenTexts;

struct LiveRequest {
    prompt_ids: Arc<Vec<u32>>,
    decoder: IncrementalDecoder,
    stops: StopMatcher,
    stop_token_ids: Vec<u32>,
    sender: UnboundedSender<Delta>,
}

/// The requests the detokenizer serves, shared with the HTTP side (register, unregister on drop).
#[derive(Clone, Default)]
pub struct Registry {
    live: Arc<Mutex<HashMap<RequestId, LiveRequest>>>,
}

impl Registry {
    /// Must happen before the engine sees the request, so no output finds it missing.
    pub fn register(&self, id: RequestId, r: Registration) {
        let live = LiveRequest {
            prompt_ids: r.prompt_ids,
            decoder: IncrementalDecoder::new(r.skip_special_tokens)
                .with_spaces_between_special_tokens(r.spaces_between_special_tokens),
            stops: match r.include_stop_str {
                true => StopMatcher::keeping_stop(r.stop),
                false => StopMatcher::new(r.stop),
            },
            stop_token_ids: r.stop_token_ids,
            sender: r.sender,
        };
        self.lock().insert(id, live);
    }

    pub fn unregister(&self, id: RequestId) {
        self.lock().remove(&id);
    }

    /// Requests registered and not finished: queued, running, or on their way to the engine.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every registered request (what a shutdown that ran out of time aborts).
    pub fn live_ids(&self) -> Vec<RequestId> {
        self.lock().keys().copied().collect()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<RequestId, LiveRequest>> {
        // A poisoned lock only means another thread panicked mid-insert; the map is still usable.
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Runs until the engine drops its sender. `abort` stops a request in the engine.
pub fn spawn_detokenizer(
    tokenizer: Tokenizer,
    registry: Registry,
    outputs: Receiver<EngineStep>,
    abort: Box<dyn Fn(RequestId) + Send>,
    mut tracker: RequestTracker,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("ferrite-detokenizer".into())
        .spawn(move || {
            let texts = TokenTexts::new(&tokenizer);
            while let Ok(step) = outputs.recv() {
                tracker.on_step(&step);
                let mut live = registry.lock();
                for out in &step.outputs {
                    let prompt_ids = match live.get(&out.id) {
                        Some(r) if out.prompt.is_some() && tracker.wants_prompt_ids() => {
                            Some(Arc::clone(&r.prompt_ids))
                        }
                        _ => None,
                    };
                    let finish = process(&tokenizer, &texts, &mut live, out, &*abort);
                    tracker.on_output(out, step.at, finish, prompt_ids);
                }
                drop(live);
                tracker.report_finished(&tokenizer);
            }
        })
}

/// Delivers one output to its client; returns how the request finished, if it did (a stop
/// string matched here is a `Stop` although the engine goes on until it sees the abort).
fn process(
    tokenizer: &Tokenizer,
    texts: &TokenTexts,
    live: &mut HashMap<RequestId, LiveRequest>,
    out: &EngineOutput,
    abort: &dyn Fn(RequestId),
) -> Option<FinishReason> {
    let Some(req) = live.get_mut(&out.id) else {
        // Unregistered: the client is gone, or a stop string already finished it.
        return out.finish;
    };
    let mut delta = Delta {
        token_ids: out.tokens.clone(),
        speculation: out.speculation,
        logprobs: out
            .logprobs
            .iter()
            .map(|lp| entry(tokenizer, texts, lp))
            .collect(),
        ..Delta::default()
    };
    if let Some(p) = &out.prompt {
        delta.prompt = Some(PromptSummary {
            num_prompt_tokens: p.num_prompt_tokens,
            num_cached_tokens: p.num_cached_tokens,
            prompt_logprobs: p.prompt_logprobs.as_ref().map(|lps| {
                req.prompt_ids
                    .iter()
                    .enumerate()
                    .map(|(i, &id)| {
                        let lp = lps.get(i).and_then(|l| l.as_ref());
                        (
                            texts.get(tokenizer, id),
                            lp.map(|l| entry(tokenizer, texts, l)),
                        )
                    })
                    .collect()
            }),
        });
    }
    let mut stopped = false;
    for &id in &out.tokens {
        let piece = req.decoder.push(tokenizer, id);
        match req.stops.push(&piece) {
            StopCheck::Continue(t) => delta.text.push_str(&t),
            StopCheck::Stopped(t) => {
                delta.text.push_str(&t);
                stopped = true;
                break;
            }
        }
    }
    delta.finish = if stopped {
        Some(Finish::Stop)
    } else {
        out.finish.map(|f| {
            let tail = req.decoder.flush(tokenizer);
            let (StopCheck::Stopped(t) | StopCheck::Continue(t)) = req.stops.push(&tail);
            delta.text.push_str(&t);
            delta.text.push_str(&req.stops.flush());
            match f {
                FinishReason::Stop => Finish::Stop,
                FinishReason::Length => Finish::Length,
                FinishReason::Abort => Finish::Aborted,
            }
        })
    };
    let finished = delta.finish.is_some();
    if finished {
        delta.stop_reason = stop_reason(req, out);
    }
    let client_gone = req.sender.send(delta).is_err();
    if stopped || (client_gone && !finished) {
        abort(out.id);
    }
    if finished || client_gone {
        live.remove(&out.id);
    }
    if stopped {
        Some(FinishReason::Stop)
    } else {
        out.finish
    }
}

/// What the request named that stopped it: a stop string (also one that came in the text
/// flushed at the end), or else the stop token id the engine stopped on. The engine says only
/// `Stop`, but the token it stopped on ends its output.
fn stop_reason(req: &LiveRequest, out: &EngineOutput) -> Option<MatchedStop> {
    if let Some(text) = req.stops.matched() {
        return Some(MatchedStop::Text(text.to_string()));
    }
    let last = *out.tokens.last()?;
    let on_stop_token =
        out.finish == Some(FinishReason::Stop) && req.stop_token_ids.contains(&last);
    on_stop_token.then_some(MatchedStop::TokenId(last))
}

fn entry(tokenizer: &Tokenizer, texts: &TokenTexts, lp: &TokenLogprob) -> LogprobEntry {
    LogprobEntry {
        token: texts.get(tokenizer, lp.token),
        logprob: lp.logprob,
        rank: lp.rank,
        top: lp
            .top
            .iter()
            .map(|&(id, l)| (texts.get(tokenizer, id), l))
            .collect(),
    }
}

#[cfg(test)]
mod tests;
