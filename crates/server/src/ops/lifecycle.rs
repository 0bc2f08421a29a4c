//! Where the server is in its life: loading the model, ready, or draining after SIGTERM.
//!
//! Liveness and readiness are different questions (Kubernetes asks both): `/health` answers
//! "is the process working" (yes once loaded, and still yes while it drains, so that a drain
//! is not cut short by a restart); `/ready` answers "send me traffic" (only when loaded, not
//! draining and, with `--unready-on-scale-out`, not saturated). Everything here is atomics:
//! probes and the drain check never wait on the scheduler or the detokenizer.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::observe::metrics::ScaleOutSignal;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The listener is up, the model is not: API requests get 503 with Retry-After.
    Loading,
    Ready,
    /// A shutdown signal came: running requests finish, new ones get 503 with Retry-After.
    Draining,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Loading => "loading",
            Phase::Ready => "ready",
            Phase::Draining => "draining",
        }
    }

    fn from_u8(v: u8) -> Phase {
        match v {
            0 => Phase::Loading,
            1 => Phase::Ready,
            _ => Phase::Draining,
        }
    }
}

/// How long a refused client is told to wait: while loading the model takes a while; while
/// draining any other replica can take the request at once.
pub const RETRY_AFTER_LOADING: Duration = Duration::from_secs(5);
pub const RETRY_AFTER_DRAINING: Duration = Duration::from_secs(1);

pub struct Lifecycle {
    phase: AtomicU8,
    /// API requests whose handler is running (a streaming answer's engine requests are
    /// followed by the registry once the handler returned the stream).
    in_flight: AtomicUsize,
    /// The scale-out monitor's verdict, shared with /metrics (which exists once loaded).
    scale_out: OnceLock<Arc<ScaleOutSignal>>,
    /// `--unready-on-scale-out`: the scale-out signal also makes `/ready` false.
    unready_on_scale_out: bool,
}

impl Lifecycle {
    pub fn new(unready_on_scale_out: bool) -> Self {
        Self {
            phase: AtomicU8::new(Phase::Loading as u8),
            in_flight: AtomicUsize::new(0),
            scale_out: OnceLock::new(),
            unready_on_scale_out,
        }
    }

    pub fn phase(&self) -> Phase {
        Phase::from_u8(self.phase.load(Ordering::Acquire))
    }

    /// Loaded: `scale_out` is the signal the metrics report.
    pub fn mark_ready(&self, scale_out: Arc<ScaleOutSignal>) {
        let _ = self.scale_out.set(scale_out);
        // A drain that began while loading wins: never back from Draining.
        let _ = self.phase.compare_exchange(
            Phase::Loading as u8,
            Phase::Ready as u8,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    pub fn begin_drain(&self) {
        self.phase.store(Phase::Draining as u8, Ordering::Release);
    }

    pub fn scale_out(&self) -> Option<&ScaleOutSignal> {
        self.scale_out.get().map(Arc::as_ref)
    }

    /// Why `/ready` is false, or `None` when it is true.
    pub fn not_ready_reason(&self) -> Option<&'static str> {
        match self.phase() {
            Phase::Ready => {}
            other => return Some(other.name()),
        }
        let saturated = self.scale_out().is_some_and(ScaleOutSignal::needed);
        (saturated && self.unready_on_scale_out).then_some("scale_out")
    }

    /// Alive: loaded (draining included).
    pub fn is_live(&self) -> bool {
        self.phase() != Phase::Loading
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Counts one API request until the guard is dropped.
    pub fn enter(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(Arc::clone(self))
    }
}

pub struct InFlight(Arc<Lifecycle>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lifecycle(unready_on_scale_out: bool) -> Arc<Lifecycle> {
        Arc::new(Lifecycle::new(unready_on_scale_out))
    }

    #[test]
    fn ready_only_between_loading_and_draining() {
        let l = lifecycle(false);
        assert_eq!(l.not_ready_reason(), Some("loading"));
        assert!(!l.is_live());
        l.mark_ready(Arc::default());
        assert_eq!(l.not_ready_reason(), None);
        assert!(l.is_live());
        l.begin_drain();
        assert_eq!(l.not_ready_reason(), Some("draining"));
        assert!(l.is_live(), "a draining server is alive");
        l.mark_ready(Arc::default());
        assert_eq!(l.phase(), Phase::Draining, "never back from draining");
    }

    #[test]
    fn the_scale_out_signal_makes_it_unready_only_when_asked() {
        for unready in [false, true] {
            let l = lifecycle(unready);
            let signal = Arc::new(ScaleOutSignal::default());
            l.mark_ready(Arc::clone(&signal));
            signal.set_waiting_queue_growth(true);
            let expected = unready.then_some("scale_out");
            assert_eq!(l.not_ready_reason(), expected);
        }
    }

    #[test]
    fn in_flight_counts_live_guards() {
        let l = lifecycle(false);
        let a = l.enter();
        let b = l.enter();
        assert_eq!(l.in_flight(), 2);
        drop(a);
        assert_eq!(l.in_flight(), 1);
        drop(b);
        assert_eq!(l.in_flight(), 0);
    }
}
