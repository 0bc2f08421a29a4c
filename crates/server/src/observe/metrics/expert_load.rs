//! `ferrite:moe_expert_tokens_total{layer, expert}` (`--expert-load-metrics`): tokens the router
//! of a mixture-of-experts model sent to each expert since load, read at scrape time from the
//! backend's counters, for operators who want to see whether the experts are balanced. Off by
//! default: a Qwen3-30B-A3B has 48 x 128 = 6,144 such series.

use std::fmt;
use std::sync::Arc;

use ferrite_engine::ExpertLoad;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::MetricType;

#[derive(Debug)]
pub struct ExpertLoadCollector(pub Arc<ExpertLoad>);

impl Collector for ExpertLoadCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let mut family = encoder.encode_descriptor(
            "ferrite:moe_expert_tokens",
            "Tokens routed to each expert of each mixture-of-experts layer since load (a token \
             counts once for each of the k experts it is sent to; prompt and generated tokens \
             alike)",
            None,
            MetricType::Counter,
        )?;
        for (layer, experts) in self.0.snapshot().iter().enumerate() {
            for (expert, &tokens) in experts.iter().enumerate() {
                let labels = [("layer", layer.to_string()), ("expert", expert.to_string())];
                ConstCounter::new(tokens).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}
