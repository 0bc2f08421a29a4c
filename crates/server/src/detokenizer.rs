//! The detokenizer thread: turns each engine step's token ids into text deltas for the HTTP
//! side, matches stop strings, aborts requests whose client went away, and follows every
//! request's timeline for the metrics and the request log ([`RequestTracker`]).

use std::collections::HashMap;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex, MutexGuard};

use ferrite_engine::{EngineOutput, EngineStep, FinishReason, RequestId, TokenLogprob};
use tokenizers::Tokenizer;
use tokio::sync::mpsc::UnboundedSender;

use crate::incremental::IncrementalDecoder;
use crate::request_tracker::RequestTracker;
use crate::stop_strings::{StopCheck, StopMatcher};
use crate::token_text::{TokenText, TokenTexts};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    Stop,
    Length,
    /// The engine aborted it (the client went away): nobody reads the answer.
    Aborted,
}

impl Finish {
    pub fn as_openai(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
            Finish::Aborted => "abort",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct LogprobEntry {
    pub token: TokenText,
    pub logprob: f32,
    pub top: Vec<(TokenText, f32)>,
}

#[derive(Debug, Clone)]
pub struct PromptSummary {
    pub num_prompt_tokens: usize,
    pub num_cached_tokens: usize,
    /// Every prompt token, with its logprob from the second one on, when they were asked for.
    pub prompt_logprobs: Option<Vec<(TokenText, Option<LogprobEntry>)>>,
}

/// What one step produced for one request, in text.
#[derive(Debug, Clone, Default)]
pub struct Delta {
    pub text: String,
    pub token_ids: Vec<u32>,
    pub logprobs: Vec<LogprobEntry>,
    /// In the first delta of a request.
    pub prompt: Option<PromptSummary>,
    pub finish: Option<Finish>,
}

/// How the HTTP side announces a request before handing it to the engine.
pub struct Registration {
    pub prompt_ids: Arc<Vec<u32>>,
    pub stop: Vec<String>,
    pub skip_special_tokens: bool,
    pub sender: UnboundedSender<Delta>,
}

struct LiveRequest {
    prompt_ids: Arc<Vec<u32>>,
    decoder: IncrementalDecoder,
    stops: StopMatcher,
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
            decoder: IncrementalDecoder::new(r.skip_special_tokens),
            stops: StopMatcher::new(r.stop),
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

fn entry(tokenizer: &Tokenizer, texts: &TokenTexts, lp: &TokenLogprob) -> LogprobEntry {
    LogprobEntry {
        token: texts.get(tokenizer, lp.token),
        logprob: lp.logprob,
        top: lp
            .top
            .iter()
            .map(|&(id, l)| (texts.get(tokenizer, id), l))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::tests::{sample, test_metrics};
    use crate::metrics::Metrics;
    use crate::request_log::RequestLogConfig;
    use crate::test_tokenizer::byte_level_tokenizer;
    use ferrite_engine::PromptInfo;
    use std::sync::mpsc;
    use std::time::Instant;
    use tokio::sync::mpsc::unbounded_channel;

    fn output(id: RequestId, token: u32, finish: Option<FinishReason>) -> EngineOutput {
        EngineOutput {
            id,
            prompt: None,
            tokens: vec![token],
            logprobs: vec![],
            finish,
        }
    }

    fn with_prompt_info(mut out: EngineOutput) -> EngineOutput {
        out.prompt = Some(PromptInfo {
            num_prompt_tokens: 3,
            num_cached_tokens: 0,
            prompt_logprobs: None,
            arrival: Instant::now(),
            scheduled_at: Some(Instant::now()),
        });
        out
    }

    /// Runs the thread over `steps` for request 1 and returns what its client received, the
    /// ids the thread asked the engine to abort, and the metrics it fed.
    fn run(
        stop: Vec<String>,
        steps: Vec<Vec<EngineOutput>>,
        drop_client: bool,
    ) -> (Vec<Delta>, Vec<RequestId>, Arc<Metrics>) {
        let metrics = test_metrics();
        let tok = byte_level_tokenizer();
        let registry = Registry::default();
        let (sender, mut rx) = unbounded_channel();
        registry.register(
            1,
            Registration {
                prompt_ids: Arc::new(vec![]),
                stop,
                skip_special_tokens: true,
                sender,
            },
        );
        if drop_client {
            rx.close();
        }
        let aborted = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&aborted);
        let (tx, outputs) = mpsc::channel();
        let thread = spawn_detokenizer(
            tok,
            registry.clone(),
            outputs,
            Box::new(move |id| record.lock().unwrap().push(id)),
            RequestTracker::new(Arc::clone(&metrics), RequestLogConfig::default()),
        )
        .unwrap();
        for outputs in steps {
            let at = Instant::now();
            tx.send(EngineStep {
                outputs,
                stats: None,
                at,
            })
            .unwrap();
        }
        drop(tx);
        thread.join().unwrap();
        let mut got = Vec::new();
        while let Ok(d) = rx.try_recv() {
            got.push(d);
        }
        if !got.is_empty() || drop_client {
            assert!(
                registry.is_empty(),
                "a finished or abandoned request stays registered"
            );
        }
        let aborted = aborted.lock().unwrap().clone();
        (got, aborted, metrics)
    }

    fn ids(text: &str) -> Vec<u32> {
        byte_level_tokenizer()
            .encode(text, false)
            .unwrap()
            .get_ids()
            .to_vec()
    }

    #[test]
    fn a_stop_string_truncates_finishes_and_aborts_the_engine_request() {
        let steps: Vec<_> = ids("hi END more")
            .into_iter()
            .map(|t| vec![output(1, t, None)])
            .collect();
        let (got, aborted, _) = run(vec![" END".into()], steps, false);
        let text: String = got.iter().map(|d| d.text.as_str()).collect();
        assert_eq!(text, "hi");
        assert_eq!(got.last().unwrap().finish, Some(Finish::Stop));
        assert_eq!(got.iter().filter(|d| d.finish.is_some()).count(), 1);
        assert_eq!(aborted, vec![1]);
    }

    #[test]
    fn an_engine_finish_flushes_held_text_and_does_not_abort() {
        let mut steps: Vec<_> = ids("ok EN")
            .into_iter()
            .map(|t| vec![output(1, t, None)])
            .collect();
        let eos = byte_level_tokenizer().token_to_id("<|im_end|>").unwrap();
        steps.push(vec![output(1, eos, Some(FinishReason::Stop))]);
        let (got, aborted, _) = run(vec![" END".into()], steps, false);
        let text: String = got.iter().map(|d| d.text.as_str()).collect();
        assert_eq!(text, "ok EN");
        assert_eq!(got.last().unwrap().finish, Some(Finish::Stop));
        assert!(aborted.is_empty());
    }

    #[test]
    fn a_vanished_client_gets_its_request_aborted() {
        let steps: Vec<_> = ids("abc")
            .into_iter()
            .map(|t| vec![output(1, t, None)])
            .collect();
        let (_, aborted, _) = run(vec![], steps, true);
        assert_eq!(aborted, vec![1]);
    }

    #[test]
    fn outputs_for_unknown_requests_are_ignored() {
        // Request 1 is registered and hears nothing, so it stays registered (checked inside).
        let (got, aborted, _) = run(vec![], vec![vec![output(7, 5, None)]], false);
        assert!(got.is_empty() && aborted.is_empty());
    }

    #[test]
    fn a_stop_string_counts_as_a_stop_once_although_the_engine_reports_an_abort() {
        let mut steps: Vec<_> = ids("hi END more")
            .into_iter()
            .map(|t| vec![output(1, t, None)])
            .collect();
        steps[0][0] = with_prompt_info(steps[0][0].clone());
        // What the engine sends after the detokenizer asked it to abort.
        steps.push(vec![EngineOutput {
            tokens: vec![],
            finish: Some(FinishReason::Abort),
            ..output(1, 0, None)
        }]);
        let (_, aborted, metrics) = run(vec![" END".into()], steps, false);
        assert_eq!(aborted, vec![1]);
        let text = metrics.render().unwrap();
        let success = |reason: &str| {
            sample(
                &text,
                &format!("ferrite:request_success_total{{finished_reason=\"{reason}\"}}"),
            )
        };
        assert_eq!(
            (success("stop"), success("abort"), success("length")),
            (Some(1.0), Some(0.0), Some(0.0))
        );
        assert_eq!(
            sample(&text, "ferrite:e2e_request_latency_seconds_count"),
            Some(1.0)
        );
        // Tokens up to and including the one that completed " END".
        assert_eq!(
            sample(&text, "ferrite:request_generation_tokens_sum"),
            Some(ids("hi END").len() as f64)
        );
    }
}
