use super::*;
use crate::observe::metrics::Metrics;
use crate::observe::request_log::RequestLogConfig;
use crate::testing::byte_level_tokenizer;
use crate::testing::{sample, test_metrics};
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
        speculation: None,
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
    run_with_stop_token_ids(stop, vec![], steps, drop_client)
}

/// [`run`], the request also naming `stop_token_ids` to report in `stop_reason`.
fn run_with_stop_token_ids(
    stop: Vec<String>,
    stop_token_ids: Vec<u32>,
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
            stop_token_ids,
            skip_special_tokens: true,
            spaces_between_special_tokens: true,
            include_stop_str: false,
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

#[test]
fn a_stop_token_id_that_ended_the_request_is_its_stop_reason() {
    let im_end = byte_level_tokenizer().token_to_id("<|im_end|>").unwrap();
    let steps = |finish| {
        let mut steps: Vec<_> = ids("ok")
            .into_iter()
            .map(|t| vec![output(1, t, None)])
            .collect();
        steps.push(vec![output(1, im_end, Some(finish))]);
        steps
    };
    let last_reason = |stop_token_ids: Vec<u32>, finish| {
        let (got, _, _) = run_with_stop_token_ids(vec![], stop_token_ids, steps(finish), false);
        got.last().unwrap().stop_reason.clone()
    };
    assert_eq!(
        last_reason(vec![im_end], FinishReason::Stop),
        Some(MatchedStop::TokenId(im_end))
    );
    // Not one the request listed (EOS, which the submission leaves out of the list).
    assert_eq!(last_reason(vec![], FinishReason::Stop), None);
    // Only the engine's Stop is a stop on that token.
    assert_eq!(last_reason(vec![im_end], FinishReason::Length), None);
}

#[test]
fn a_stop_string_is_the_stop_reason_even_with_stop_token_ids() {
    let steps: Vec<_> = ids("hi END more")
        .into_iter()
        .map(|t| vec![output(1, t, None)])
        .collect();
    let last_id = ids("hi END").last().copied().unwrap();
    let (got, _, _) = run_with_stop_token_ids(vec![" END".into()], vec![last_id], steps, false);
    assert_eq!(
        got.last().unwrap().stop_reason,
        Some(MatchedStop::Text(" END".into()))
    );
}
