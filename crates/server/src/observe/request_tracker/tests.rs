use std::time::{Duration, Instant};

use ferrite_engine::{EngineOutput, FinishReason, PromptInfo};

use super::*;
use crate::testing::{sample, test_metrics};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn output(id: RequestId, tokens: Vec<u32>, finish: Option<FinishReason>) -> EngineOutput {
    EngineOutput {
        id,
        prompt: None,
        tokens,
        logprobs: vec![],
        finish,
        speculation: None,
    }
}

fn first(
    id: RequestId,
    t0: Instant,
    scheduled: Option<Duration>,
    tokens: Vec<u32>,
) -> EngineOutput {
    EngineOutput {
        prompt: Some(PromptInfo {
            num_prompt_tokens: 12,
            num_cached_tokens: 4,
            prompt_logprobs: None,
            arrival: t0,
            scheduled_at: scheduled.map(|d| t0 + d),
        }),
        ..output(id, tokens, None)
    }
}

fn tracker(token_ids: bool) -> (RequestTracker, Arc<Metrics>) {
    let metrics = test_metrics();
    let log = RequestLogConfig {
        token_ids,
        prompts: false,
        disabled: false,
    };
    (RequestTracker::new(Arc::clone(&metrics), log), metrics)
}

#[test]
fn a_finished_request_has_vllms_intervals() {
    let (tracker, metrics) = tracker(true);
    // The name recorded at submission is the one the finished request reports.
    let names = RequestNames::default();
    let mut tracker = tracker.with_names(names.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(crate::observe::request_names::scope(
        crate::observe::request_names::RequestName::new("req-7".into(), false),
        async { names.record(7) },
    ));
    let t0 = Instant::now();
    let prompt = Some(Arc::new(vec![1, 2, 3]));
    tracker.on_output(
        &first(7, t0, Some(ms(10)), vec![5]),
        t0 + ms(30),
        None,
        prompt,
    );
    tracker.on_output(&output(7, vec![6], None), t0 + ms(40), None, None);
    let last = output(7, vec![8], Some(FinishReason::Length));
    tracker.on_output(&last, t0 + ms(55), last.finish, None);
    assert_eq!(tracker.num_live(), 0);
    let expected = FinishedRequest {
        id: 7,
        request_id: Some("req-7".into()),
        finish: FinishReason::Length,
        num_prompt_tokens: 12,
        num_cached_tokens: 4,
        num_generation_tokens: 3,
        queue: ms(10),
        prefill: ms(20),
        decode: ms(25),
        time_to_first_token: Some(ms(30)),
        e2e: ms(55),
        prompt_ids: Some(Arc::new(vec![1, 2, 3])),
        output_ids: Some(vec![5, 6, 8]),
        speculation: None,
    };
    assert_eq!(tracker.finished, vec![expected]);

    let text = metrics.render().unwrap();
    let get = |s: &str| sample(&text, s).unwrap();
    assert_eq!(get("ferrite:time_to_first_token_seconds_count"), 1.0);
    assert!((get("ferrite:time_to_first_token_seconds_sum") - 0.030).abs() < 1e-9);
    assert_eq!(get("ferrite:inter_token_latency_seconds_count"), 2.0);
    assert!((get("ferrite:inter_token_latency_seconds_sum") - 0.025).abs() < 1e-9);
}

#[test]
fn a_request_that_never_ran_queued_its_whole_life() {
    let (mut tracker, _) = tracker(false);
    let t0 = Instant::now();
    let aborted = EngineOutput {
        finish: Some(FinishReason::Abort),
        ..first(3, t0, None, vec![])
    };
    tracker.on_output(&aborted, t0 + ms(70), aborted.finish, None);
    let r = &tracker.finished[0];
    assert_eq!(
        (r.queue, r.prefill, r.decode, r.e2e),
        (ms(70), ms(0), ms(0), ms(70))
    );
    assert_eq!((r.time_to_first_token, r.num_generation_tokens), (None, 0));
    assert_eq!((r.prompt_ids.as_ref(), r.output_ids.as_ref()), (None, None));
}

#[test]
fn outputs_after_the_finish_are_ignored() {
    let (mut tracker, metrics) = tracker(false);
    let t0 = Instant::now();
    tracker.on_output(
        &first(1, t0, Some(ms(1)), vec![4]),
        t0 + ms(5),
        Some(FinishReason::Stop),
        None,
    );
    // The engine's abort that follows a stop string matched by the detokenizer.
    let late = output(1, vec![], Some(FinishReason::Abort));
    tracker.on_output(&late, t0 + ms(9), late.finish, None);
    tracker.on_output(&output(1, vec![9], None), t0 + ms(9), None, None);
    assert_eq!(tracker.finished.len(), 1);
    assert_eq!(tracker.finished[0].finish, FinishReason::Stop);
    assert_eq!(tracker.num_live(), 0);
    tracker.report_finished(&crate::testing::byte_level_tokenizer());
    assert!(tracker.finished.is_empty());
    let text = metrics.render().unwrap();
    assert_eq!(
        sample(
            &text,
            r#"ferrite:request_success_total{finished_reason="stop"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"ferrite:request_success_total{finished_reason="abort"}"#
        ),
        Some(0.0)
    );
    assert_eq!(
        sample(&text, "ferrite:inter_token_latency_seconds_count"),
        Some(0.0)
    );
}
