//! `ferrite:scale_out_needed{reason}`: the operator's rule "a growing queue or KV thrashing is
//! a deployment failure, scale out instead" as a gauge an autoscaler can act on. The verdicts
//! are set by the scale-out monitor (`crate::ops::scale_out`) and read here at scrape time.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

/// The monitor's two verdicts; either one means "add a replica".
#[derive(Debug, Default)]
pub struct ScaleOutSignal {
    waiting_queue_growth: AtomicBool,
    preemptions: AtomicBool,
}

impl ScaleOutSignal {
    /// The waiting queue has been non-empty and not shrinking for the whole window.
    pub fn set_waiting_queue_growth(&self, on: bool) {
        self.waiting_queue_growth.store(on, Ordering::Relaxed);
    }

    /// Preemptions (KV pages ran out, sequences recomputed) over the window exceeded the rate.
    pub fn set_preemptions(&self, on: bool) {
        self.preemptions.store(on, Ordering::Relaxed);
    }

    pub fn waiting_queue_growth(&self) -> bool {
        self.waiting_queue_growth.load(Ordering::Relaxed)
    }

    pub fn preemptions(&self) -> bool {
        self.preemptions.load(Ordering::Relaxed)
    }

    pub fn needed(&self) -> bool {
        self.waiting_queue_growth() || self.preemptions()
    }
}

#[derive(Debug)]
pub struct ScaleOutCollector(pub Arc<ScaleOutSignal>);

impl Collector for ScaleOutCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let mut family = encoder.encode_descriptor(
            "ferrite:scale_out_needed",
            "1 when this replica is saturated and the deployment should scale out, by reason: \
             waiting_queue_growth (the waiting queue was non-empty and did not shrink for \
             --scale-out-window seconds), preemptions (more than --scale-out-preemption-rate \
             preemptions per second over that window: the KV cache is thrashing)",
            None,
            MetricType::Gauge,
        )?;
        for (reason, on) in [
            ("waiting_queue_growth", self.0.waiting_queue_growth()),
            ("preemptions", self.0.preemptions()),
        ] {
            let labels = [("reason", reason)];
            ConstGauge::new(i64::from(on)).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}
