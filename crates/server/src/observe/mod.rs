//! What the server tells about itself: the Prometheus metrics, one log line per finished
//! request, OpenTelemetry spans, KV-cache events for routers, and the per-request timelines
//! (kept on the detokenizer thread) that feed them.

pub mod finished_request;
pub mod kv_events;
pub mod metrics;
pub mod request_log;
pub mod request_names;
pub mod request_tracker;
pub mod traces;
