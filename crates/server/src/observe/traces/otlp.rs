//! The OTLP/HTTP JSON encoding of spans (`POST /v1/traces`, `Content-Type:
//! application/json`): the protobuf messages' JSON mapping, with trace and span ids as hex
//! strings and 64-bit integers as decimal strings, as the OTLP specification asks.

use serde::Serialize;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportTraceServiceRequest {
    pub resource_spans: Vec<ResourceSpans>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSpans {
    pub resource: Resource,
    pub scope_spans: Vec<ScopeSpans>,
}

#[derive(Debug, Serialize)]
pub struct Resource {
    pub attributes: Vec<KeyValue>,
}

#[derive(Debug, Serialize)]
pub struct ScopeSpans {
    pub scope: Scope,
    pub spans: Vec<Span>,
}

#[derive(Debug, Serialize)]
pub struct Scope {
    pub name: &'static str,
    pub version: &'static str,
}

/// `SPAN_KIND_SERVER`: the span covers a request this process served.
pub const SPAN_KIND_SERVER: u8 = 2;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Span {
    pub trace_id: String,
    pub span_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub parent_span_id: String,
    pub name: &'static str,
    pub kind: u8,
    pub start_time_unix_nano: String,
    pub end_time_unix_nano: String,
    pub attributes: Vec<KeyValue>,
}

#[derive(Debug, Clone, Serialize)]
pub struct KeyValue {
    pub key: &'static str,
    pub value: AnyValue,
}

#[derive(Debug, Clone, Serialize)]
pub enum AnyValue {
    #[serde(rename = "stringValue")]
    String(String),
    #[serde(rename = "intValue")]
    Int(String),
    #[serde(rename = "doubleValue")]
    Double(f64),
    #[serde(rename = "arrayValue")]
    Array(ArrayValue),
}

#[derive(Debug, Clone, Serialize)]
pub struct ArrayValue {
    pub values: Vec<AnyValue>,
}

impl KeyValue {
    pub fn string(key: &'static str, value: impl Into<String>) -> Self {
        Self {
            key,
            value: AnyValue::String(value.into()),
        }
    }

    pub fn int(key: &'static str, value: u64) -> Self {
        Self {
            key,
            value: AnyValue::Int(value.to_string()),
        }
    }

    pub fn double(key: &'static str, value: f64) -> Self {
        Self {
            key,
            value: AnyValue::Double(value),
        }
    }

    pub fn strings(key: &'static str, values: &[&str]) -> Self {
        let values = values
            .iter()
            .map(|v| AnyValue::String((*v).to_string()))
            .collect();
        Self {
            key,
            value: AnyValue::Array(ArrayValue { values }),
        }
    }
}

/// One export request carrying `spans`, from service `service_name`.
pub fn export_request(service_name: &str, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Resource {
                attributes: vec![KeyValue::string("service.name", service_name)],
            },
            scope_spans: vec![ScopeSpans {
                scope: Scope {
                    name: "ferrite",
                    version: env!("CARGO_PKG_VERSION"),
                },
                spans,
            }],
        }],
    }
}
