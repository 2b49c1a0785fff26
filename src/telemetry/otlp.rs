//! The part of OTLP's `MetricsData` protobuf (opentelemetry-proto,
//! `opentelemetry/proto/metrics/v1/metrics.proto`) that a KIP-714 push carries and runnel
//! exposes: resource attributes, and gauges and sums of numbers. Histograms, summaries,
//! exemplars and non-scalar attribute values are skipped by the decoder as unknown
//! fields. The field numbers are OTLP's; the types are declared here.
//!
//! The input is at most `telemetry.max.bytes` (decompressed under that cap), and prost
//! refuses any length that runs past the end of its input, so nothing is allocated by a
//! length read from the wire beyond the payload's own size.

use prost::Message;

#[derive(Clone, PartialEq, Message)]
pub struct MetricsData {
    #[prost(message, repeated, tag = "1")]
    pub resource_metrics: Vec<ResourceMetrics>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ResourceMetrics {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub scope_metrics: Vec<ScopeMetrics>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ScopeMetrics {
    #[prost(message, repeated, tag = "2")]
    pub metrics: Vec<Metric>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Metric {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub description: String,
    #[prost(string, tag = "3")]
    pub unit: String,
    #[prost(oneof = "Data", tags = "5, 7")]
    pub data: Option<Data>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Data {
    #[prost(message, tag = "5")]
    Gauge(Gauge),
    #[prost(message, tag = "7")]
    Sum(Sum),
}

#[derive(Clone, PartialEq, Message)]
pub struct Gauge {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<NumberDataPoint>,
}

/// OTLP's `AggregationTemporality`: 1 delta, 2 cumulative.
pub const TEMPORALITY_DELTA: i32 = 1;

#[derive(Clone, PartialEq, Message)]
pub struct Sum {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<NumberDataPoint>,
    #[prost(int32, tag = "2")]
    pub aggregation_temporality: i32,
    #[prost(bool, tag = "3")]
    pub is_monotonic: bool,
}

#[derive(Clone, PartialEq, Message)]
pub struct NumberDataPoint {
    #[prost(message, repeated, tag = "7")]
    pub attributes: Vec<KeyValue>,
    #[prost(fixed64, tag = "2")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "3")]
    pub time_unix_nano: u64,
    #[prost(oneof = "Number", tags = "4, 6")]
    pub value: Option<Number>,
}

#[derive(Clone, Copy, PartialEq, prost::Oneof)]
pub enum Number {
    #[prost(double, tag = "4")]
    AsDouble(f64),
    #[prost(sfixed64, tag = "6")]
    AsInt(i64),
}

#[derive(Clone, PartialEq, Message)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

#[derive(Clone, PartialEq, Message)]
pub struct AnyValue {
    #[prost(oneof = "Value", tags = "1, 2, 3, 4")]
    pub value: Option<Value>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Value {
    #[prost(string, tag = "1")]
    String(String),
    #[prost(bool, tag = "2")]
    Bool(bool),
    #[prost(int64, tag = "3")]
    Int(i64),
    #[prost(double, tag = "4")]
    Double(f64),
}

impl KeyValue {
    /// The value as a label value; `None` for arrays, maps, bytes and absent values.
    pub fn text(&self) -> Option<String> {
        match self.value.as_ref()?.value.as_ref()? {
            Value::String(s) => Some(s.clone()),
            Value::Bool(b) => Some(b.to_string()),
            Value::Int(i) => Some(i.to_string()),
            Value::Double(d) => Some(d.to_string()),
        }
    }
}

impl Number {
    pub fn as_f64(self) -> f64 {
        match self {
            Number::AsDouble(d) => d,
            Number::AsInt(i) => i as f64,
        }
    }
}

/// Decodes a (decompressed) push payload.
pub fn decode(payload: &[u8]) -> Result<MetricsData, prost::DecodeError> {
    MetricsData::decode(payload)
}
