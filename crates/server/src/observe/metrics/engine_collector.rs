//! The series the engine keeps as atomics ([`EngineStats`]), read at scrape time: the running
//! and waiting gauges, KV usage, the token and prefix-cache counters, preemptions, and the
//! constant `cache_config_info`.

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use ferrite_engine::EngineStats;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use super::{MetricNames, MetricsConfig};

pub struct EngineCollector {
    stats: Arc<EngineStats>,
    prefix: &'static str,
    /// The vLLM names are asked for: also the series older endpoint pickers read.
    vllm_names: bool,
    /// `cache_config_info`'s labels, as vLLM spells them (Python's `str` of each value).
    cache_config: [(&'static str, String); 3],
}

impl fmt::Debug for EngineCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EngineCollector")
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl EngineCollector {
    pub fn new(config: &MetricsConfig, stats: Arc<EngineStats>) -> Self {
        let python_bool = if config.enable_prefix_caching {
            "True"
        } else {
            "False"
        };
        Self {
            stats,
            prefix: config.names.prefix(),
            vllm_names: config.names == MetricNames::Vllm,
            cache_config: [
                ("block_size", config.page_size.to_string()),
                ("num_gpu_blocks", config.num_pages.to_string()),
                ("enable_prefix_caching", python_bool.to_string()),
            ],
        }
    }

    fn encode_one(
        &self,
        encoder: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        metric: impl EncodeMetric,
    ) -> fmt::Result {
        let name = format!("{}{name}", self.prefix);
        let metric_encoder = encoder.encode_descriptor(&name, help, None, metric.metric_type())?;
        metric.encode(metric_encoder)
    }
}

impl EngineCollector {
    /// What endpoint pickers built against older vLLM read: the KV usage under its former
    /// name (the Gateway API Inference Extension's model-server protocol still names it), and
    /// `lora_requests_info`, which the endpoint picker scrapes by default for LoRA affinity
    /// and logs an error for when absent. ferrite serves no adapters: `max_lora` is 0 and
    /// none run or wait; the value is the time of the scrape, as vLLM's is the time its
    /// numbers were taken.
    fn encode_vllm_compatibility(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        self.encode_one(
            e,
            "gpu_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage (vLLM's former name of kv_cache_usage_perc).",
            ConstGauge::new(self.stats.kv_cache_usage()),
        )?;
        let name = format!("{}lora_requests_info", self.prefix);
        let mut info = e.encode_descriptor(
            &name,
            "Running stats on lora requests (ferrite serves no LoRA adapters).",
            None,
            MetricType::Gauge,
        )?;
        let labels = [
            ("max_lora", "0"),
            ("running_lora_adapters", ""),
            ("waiting_lora_adapters", ""),
        ];
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        ConstGauge::new(now).encode(info.encode_family(&labels)?)
    }

    /// vLLM's speculative-decoding counters (only when the engine speculates).
    fn encode_speculation(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let s = &self.stats.speculation;
        self.encode_one(
            e,
            "spec_decode_num_drafts",
            "Number of spec decoding drafts (one per sequence and verification step).",
            counter(&s.num_drafts),
        )?;
        self.encode_one(
            e,
            "spec_decode_num_draft_tokens",
            "Number of draft tokens.",
            counter(&s.num_draft_tokens),
        )?;
        self.encode_one(
            e,
            "spec_decode_num_accepted_tokens",
            "Number of accepted tokens.",
            counter(&s.num_accepted_tokens),
        )?;
        let name = format!("{}spec_decode_num_accepted_tokens_per_pos", self.prefix);
        let mut family = e.encode_descriptor(
            &name,
            "Accepted tokens per draft position.",
            None,
            MetricType::Counter,
        )?;
        let positions = s.num_tokens.load(Ordering::Relaxed);
        for (position, value) in s
            .num_accepted_tokens_per_pos
            .iter()
            .enumerate()
            .take(positions)
        {
            let labels = [("position", position.to_string())];
            counter(value).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

fn gauge(value: &AtomicUsize) -> ConstGauge<i64> {
    ConstGauge::new(value.load(Ordering::Relaxed) as i64)
}

fn counter(value: &AtomicU64) -> ConstCounter<u64> {
    ConstCounter::new(value.load(Ordering::Relaxed))
}

impl Collector for EngineCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let s = &*self.stats;
        let e = &mut encoder;
        self.encode_one(
            e,
            "num_requests_running",
            "Number of requests in model execution batches.",
            gauge(&s.num_running),
        )?;
        self.encode_one(
            e,
            "num_requests_waiting",
            "Number of requests waiting to be processed.",
            gauge(&s.num_waiting),
        )?;
        self.encode_one(
            e,
            "kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage (pages referenced by live requests; \
             cached pages nobody references count as free).",
            ConstGauge::new(s.kv_cache_usage()),
        )?;
        if self.vllm_names {
            self.encode_vllm_compatibility(e)?;
        }
        self.encode_one(
            e,
            "prompt_tokens",
            "Number of prefill tokens processed (whole prompts, counted when a request's first \
             token is sampled; one per choice).",
            counter(&s.prompt_tokens_total),
        )?;
        self.encode_one(
            e,
            "generation_tokens",
            "Number of generation tokens processed.",
            counter(&s.generation_tokens_total),
        )?;
        self.encode_one(
            e,
            "prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            counter(&s.prefix_cache_queries_total),
        )?;
        self.encode_one(
            e,
            "prefix_cache_hits",
            "Prefix cache hits, in terms of number of cached tokens.",
            counter(&s.prefix_cache_hits_total),
        )?;
        self.encode_one(
            e,
            "num_preemptions",
            "Cumulative number of preemption from the engine.",
            counter(&s.num_preemptions_total),
        )?;
        if s.speculation.enabled.load(Ordering::Relaxed) {
            self.encode_speculation(e)?;
        }
        let name = format!("{}cache_config_info", self.prefix);
        let mut info = e.encode_descriptor(
            &name,
            "Information of the LLMEngine CacheConfig (num_gpu_blocks: KV pool pages).",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(1i64).encode(info.encode_family(&self.cache_config)?)
    }
}
