//! The facts the engine reports for metrics: per-step work and timings, per-request instants.

use std::time::{Duration, Instant};

use crate::request::{FinishReason, GenerationRequest};
use crate::testing::fake_backend::FakeBackend;
use crate::testing::harness::{greedy, Harness, Setup};

fn request_at(id: u64, len: u32, max_tokens: usize, arrival: Instant) -> GenerationRequest {
    GenerationRequest {
        id,
        prompt: (0..len).map(|t| t % 31).collect(),
        params: greedy(max_tokens),
        arrival,
    }
}

#[test]
fn step_stats_count_the_batch_and_time_the_forward_pass() {
    let mut backend = FakeBackend::new(4096);
    let delay = Duration::from_millis(3);
    backend.delay = Some(delay);
    let mut harness = Harness::with_backend(Setup::default(), vec![], backend);
    let arrival = Instant::now();
    harness.core.add_request(request_at(1, 40, 3, arrival));
    harness.core.add_request(request_at(2, 7, 3, arrival));

    let prefill = harness.core.step_with_stats();
    let stats = prefill.stats.expect("a forward pass ran");
    assert_eq!((stats.num_tokens, stats.num_seqs), (47, 2));
    assert!(stats.forward >= delay, "{stats:?}");
    assert_eq!(prefill.outputs.len(), 2);
    for out in &prefill.outputs {
        let info = out
            .prompt
            .as_ref()
            .expect("first output carries PromptInfo");
        assert_eq!(info.arrival, arrival);
        let scheduled = info.scheduled_at.expect("it ran");
        assert!(arrival <= scheduled && scheduled <= prefill.at);
    }

    let decode = harness.core.step_with_stats();
    let stats = decode.stats.expect("a forward pass ran");
    assert_eq!((stats.num_tokens, stats.num_seqs), (2, 2));
    assert!(decode.at > prefill.at);
    assert!(decode.outputs.iter().all(|o| o.prompt.is_none()));

    while harness.core.has_work() {
        harness.core.step_with_stats();
    }
    let idle = harness.core.step_with_stats();
    assert!(idle.stats.is_none() && idle.outputs.is_empty());
}

#[test]
fn a_request_that_never_ran_reports_no_scheduling_instant() {
    let mut harness = Harness::new(
        Setup {
            max_seqs: 1,
            ..Setup::default()
        },
        vec![],
    );
    let arrival = Instant::now();
    harness.core.add_request(request_at(1, 20, 50, arrival));
    harness.core.add_request(request_at(2, 20, 50, arrival));
    harness.core.step_with_stats();
    harness.core.abort(2);
    let step = harness.core.step_with_stats();
    let aborted = step
        .outputs
        .iter()
        .find(|o| o.id == 2)
        .expect("the abort is reported");
    assert_eq!(aborted.finish, Some(FinishReason::Abort));
    let info = aborted.prompt.as_ref().expect("its only output");
    assert_eq!((info.arrival, info.scheduled_at), (arrival, None));
}
