//! `--kv-events-config`: vLLM's `KVEventsConfig` JSON, field for field.

use serde::Deserialize;

/// vLLM's defaults: `tcp://*:5557`, 10,000 batches kept for replay, 100,000 events queued.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvEventsConfig {
    #[serde(default)]
    pub enable_kv_cache_events: bool,
    /// `zmq`, or `null` (events are off).
    #[serde(default)]
    pub publisher: Option<String>,
    /// The PUB socket: bound when it has a wildcard (`*`, `::`), else connected (vLLM's rule).
    #[serde(default = "default_endpoint")]
    pub endpoint: String,
    /// A ROUTER socket answering replay requests (8-byte big-endian first sequence number).
    #[serde(default)]
    pub replay_endpoint: Option<String>,
    /// Batches kept for replay.
    #[serde(default = "default_buffer_steps")]
    pub buffer_steps: usize,
    /// Events queued between the scheduler thread and the publisher thread at most.
    #[serde(default = "default_max_queue_size")]
    pub max_queue_size: usize,
    /// The first frame of every message; llm-d reads `kv@<pod>@<model>`.
    #[serde(default)]
    pub topic: String,
}

fn default_endpoint() -> String {
    "tcp://*:5557".into()
}

fn default_buffer_steps() -> usize {
    10_000
}

fn default_max_queue_size() -> usize {
    100_000
}

impl KvEventsConfig {
    /// Parses the flag; `Ok(None)` when events are not enabled (or the publisher is `null`).
    pub fn parse(json: &str) -> Result<Option<Self>, String> {
        let config: Self = serde_json::from_str(json).map_err(|e| {
            let hint = if e.to_string().contains("hwm") {
                " (the ZMQ high-water mark is not configurable in ferrite's publisher)"
            } else {
                ""
            };
            format!("--kv-events-config: {e}{hint}")
        })?;
        match config.publisher.as_deref() {
            _ if !config.enable_kv_cache_events => Ok(None),
            Some("null") => Ok(None),
            None | Some("zmq") => {
                if config.max_queue_size == 0 || config.buffer_steps == 0 {
                    return Err(
                        "--kv-events-config: max_queue_size and buffer_steps must be >= 1".into(),
                    );
                }
                Ok(Some(config))
            }
            Some(other) => Err(format!(
                "--kv-events-config: unknown publisher {other:?} (ferrite has \"zmq\" and \"null\")"
            )),
        }
    }

    /// The PUB endpoint in the form the ZMQ library takes, and whether to bind it.
    pub fn pub_endpoint(&self) -> (String, bool) {
        endpoint(&self.endpoint)
    }
}

/// vLLM binds an endpoint with a wildcard host and connects to any other; `*` is written as
/// the address it means (every interface).
pub fn endpoint(raw: &str) -> (String, bool) {
    let bind = raw.contains('*') || raw.contains("::") || raw.starts_with("ipc://");
    (raw.replace("//*:", "//0.0.0.0:"), bind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vllms_json_with_its_defaults() {
        let json = r#"{"enable_kv_cache_events": true, "publisher": "zmq", "topic": "kv@p@m"}"#;
        let config = KvEventsConfig::parse(json).unwrap().unwrap();
        assert_eq!(config.endpoint, "tcp://*:5557");
        assert_eq!(config.pub_endpoint(), ("tcp://0.0.0.0:5557".into(), true));
        assert_eq!(
            (config.buffer_steps, config.max_queue_size),
            (10_000, 100_000)
        );
        assert_eq!(config.replay_endpoint, None);
        assert_eq!(
            endpoint("tcp://router:5557"),
            ("tcp://router:5557".into(), false)
        );
    }

    #[test]
    fn disabled_null_and_bad_configs() {
        let off = r#"{"enable_kv_cache_events": false, "publisher": "zmq"}"#;
        assert_eq!(KvEventsConfig::parse(off), Ok(None));
        let null = r#"{"enable_kv_cache_events": true, "publisher": "null"}"#;
        assert_eq!(KvEventsConfig::parse(null), Ok(None));
        let unknown = r#"{"enable_kv_cache_events": true, "publisher": "kafka"}"#;
        assert!(KvEventsConfig::parse(unknown)
            .unwrap_err()
            .contains("kafka"));
        let hwm = r#"{"enable_kv_cache_events": true, "hwm": 5}"#;
        assert!(KvEventsConfig::parse(hwm)
            .unwrap_err()
            .contains("high-water"));
        assert!(KvEventsConfig::parse("{").is_err());
    }
}
