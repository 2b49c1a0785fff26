//! The latest pushed value of each client metric, for `/metrics`.
//!
//! A series is one metric of one client instance with one set of data-point attributes
//! (a per-partition lag metric has a series per topic partition). Gauges keep their last
//! value; sums pushed with delta temporality (what runnel asks for, as Kafka does) are
//! added up into a running total, cumulative ones replace it. Bounded: a client's series
//! go when it stops pushing (three push intervals, at least a minute), and beyond
//! [`MAX_SERIES`] new series are dropped (counted in `client_telemetry_dropped_series`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use uuid::Uuid;

use super::manager::expiry_ms;
use super::otlp::{self, Data, MetricsData};

/// Series kept over all clients.
pub const MAX_SERIES: usize = 10_000;
/// Resource or data-point attributes kept per series; label values are cut to
/// [`MAX_LABEL_LEN`] bytes.
const MAX_ATTRIBUTES: usize = 16;
const MAX_LABEL_LEN: usize = 256;
/// Longest metric description kept for the family's HELP.
const MAX_HELP_LEN: usize = 512;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    /// A monotonic or non-monotonic sum, exposed as a counter.
    Sum,
}

#[derive(Debug, Clone)]
pub struct Series {
    /// Data-point attributes, sanitised to label names.
    pub attributes: Vec<(String, String)>,
    pub value: f64,
}

/// Label (name, value) pairs, sorted by name.
type LabelPairs = Vec<(String, String)>;

/// One pushed metric of one client: its type, description and series by attributes.
#[derive(Debug)]
struct PushedMetric {
    kind: Kind,
    help: String,
    series: BTreeMap<LabelPairs, f64>,
}

#[derive(Debug, Default)]
struct Client {
    /// `client_instance_id`, `client_id` and the resource attributes, as labels.
    labels: Vec<(String, String)>,
    /// By OTLP metric name.
    metrics: BTreeMap<String, PushedMetric>,
    last_push_ms: i64,
    push_interval_ms: i32,
}

impl Client {
    fn series(&self) -> usize {
        self.metrics.values().map(|m| m.series.len()).sum()
    }
}

/// One metric family to render: every client's series of one OTLP metric name.
#[derive(Debug)]
pub struct Family {
    pub name: String,
    pub kind: Kind,
    pub help: String,
    pub rows: Vec<(Vec<(String, String)>, f64)>,
}

#[derive(Debug, Default)]
pub struct TelemetryStore {
    clients: Mutex<HashMap<Uuid, Client>>,
    dropped_series: std::sync::atomic::AtomicU64,
}

/// A Prometheus name from an OTLP one: every character outside `[a-zA-Z0-9_]` becomes `_`.
pub fn sanitise(name: &str) -> String {
    let s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        format!("_{s}")
    } else {
        s
    }
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// A description fit for a HELP line: no control characters or backslashes (the text
/// format would read them as escapes or line ends), at most [`MAX_HELP_LEN`] bytes.
fn help(description: &str) -> String {
    let clean: String = description.chars().map(|c| if c.is_control() || c == '\\' { ' ' } else { c }).collect();
    truncate(clean, MAX_HELP_LEN)
}

fn attributes(kvs: &[otlp::KeyValue]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = kvs
        .iter()
        .filter_map(|kv| Some((sanitise(&kv.key), truncate(kv.text()?, MAX_LABEL_LEN))))
        .filter(|(k, _)| !k.is_empty())
        .take(MAX_ATTRIBUTES)
        .collect();
    out.sort();
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

impl TelemetryStore {
    /// Records a push of `client_instance_id` (whose Kafka client id is `client_id`).
    pub fn record(
        &self,
        client_instance_id: Uuid,
        client_id: &str,
        data: &MetricsData,
        push_interval_ms: i32,
        now_ms: i64,
    ) {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients.retain(|_, c| now_ms - c.last_push_ms <= expiry_ms(c.push_interval_ms));
        let others: usize = clients.iter().filter(|(id, _)| **id != client_instance_id).map(|(_, c)| c.series()).sum();
        let client = clients.entry(client_instance_id).or_default();
        client.last_push_ms = now_ms;
        client.push_interval_ms = push_interval_ms;
        let mut dropped = 0u64;
        for rm in &data.resource_metrics {
            let mut labels = vec![
                ("client_instance_id".to_owned(), client_instance_id.to_string()),
                ("client_id".to_owned(), truncate(client_id.to_owned(), MAX_LABEL_LEN)),
            ];
            for (k, v) in attributes(rm.resource.as_ref().map_or(&[][..], |r| &r.attributes)) {
                if !labels.iter().any(|(l, _)| *l == k) {
                    labels.push((k, v));
                }
            }
            client.labels = labels;
            for metric in rm.scope_metrics.iter().flat_map(|s| &s.metrics) {
                let (kind, points, delta) = match &metric.data {
                    Some(Data::Gauge(g)) => (Kind::Gauge, &g.data_points, false),
                    Some(Data::Sum(s)) => {
                        (Kind::Sum, &s.data_points, s.aggregation_temporality == otlp::TEMPORALITY_DELTA)
                    }
                    None => continue,
                };
                if metric.name.is_empty() {
                    continue;
                }
                let total = others + client.series();
                let fresh = || PushedMetric { kind, help: help(&metric.description), series: BTreeMap::new() };
                let entry = client.metrics.entry(metric.name.clone()).or_insert_with(fresh);
                if entry.kind != kind {
                    // The same name pushed as another type: start over with the new one.
                    *entry = fresh();
                }
                let mut added = 0;
                for p in points {
                    let Some(value) = p.value.map(otlp::Number::as_f64) else { continue };
                    let key = attributes(&p.attributes);
                    match entry.series.get_mut(&key) {
                        Some(v) if delta => *v += value,
                        Some(v) => *v = value,
                        None if total + added >= MAX_SERIES => dropped += 1,
                        None => {
                            entry.series.insert(key, value);
                            added += 1;
                        }
                    }
                }
                if entry.series.is_empty() {
                    client.metrics.remove(&metric.name);
                }
            }
        }
        if dropped > 0 {
            self.dropped_series.fetch_add(dropped, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(%client_instance_id, dropped, max = MAX_SERIES, "client telemetry series over the cap were dropped");
        }
    }

    /// Every family, the expired clients left out: one per OTLP metric name, rows
    /// labelled with the client's labels and then the data point's attributes.
    pub fn families(&self, now_ms: i64) -> Vec<Family> {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients.retain(|_, c| now_ms - c.last_push_ms <= expiry_ms(c.push_interval_ms));
        let mut families: BTreeMap<String, Family> = BTreeMap::new();
        for client in clients.values() {
            for (name, PushedMetric { kind, help, series }) in &client.metrics {
                let family = families.entry(name.clone()).or_insert_with(|| Family {
                    name: name.clone(),
                    kind: *kind,
                    help: help.clone(),
                    rows: Vec::new(),
                });
                if family.kind != *kind {
                    continue;
                }
                for (attrs, value) in series {
                    let mut labels = client.labels.clone();
                    for (k, v) in attrs {
                        if !labels.iter().any(|(l, _)| l == k) {
                            labels.push((k.clone(), v.clone()));
                        }
                    }
                    family.rows.push((labels, *value));
                }
            }
        }
        families.into_values().collect()
    }

    pub fn series_count(&self) -> usize {
        self.clients.lock().unwrap_or_else(|e| e.into_inner()).values().map(Client::series).sum()
    }

    pub fn dropped_series(&self) -> u64 {
        self.dropped_series.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::otlp::*;

    fn kv(k: &str, v: &str) -> KeyValue {
        KeyValue { key: k.into(), value: Some(AnyValue { value: Some(Value::String(v.into())) }) }
    }

    fn point(v: f64, attrs: Vec<KeyValue>) -> NumberDataPoint {
        NumberDataPoint {
            attributes: attrs,
            start_time_unix_nano: 0,
            time_unix_nano: 0,
            value: Some(Number::AsDouble(v)),
        }
    }

    pub fn payload(metrics: Vec<Metric>) -> MetricsData {
        MetricsData {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(Resource { attributes: vec![kv("group_id", "g1"), kv("client.rack", "r")] }),
                scope_metrics: vec![ScopeMetrics { metrics }],
            }],
        }
    }

    fn gauge(name: &str, points: Vec<NumberDataPoint>) -> Metric {
        Metric {
            name: name.into(),
            description: "d".into(),
            unit: String::new(),
            data: Some(Data::Gauge(Gauge { data_points: points })),
        }
    }

    #[test]
    fn gauges_keep_the_latest_value_and_delta_sums_add_up() {
        let s = TelemetryStore::default();
        let id = Uuid::new_v4();
        let sum = |v| Metric {
            name: "org.apache.kafka.consumer.fetch.manager.records.consumed.total".into(),
            description: String::new(),
            unit: String::new(),
            data: Some(Data::Sum(Sum {
                data_points: vec![point(v, vec![])],
                aggregation_temporality: 1,
                is_monotonic: true,
            })),
        };
        let lag = |v| gauge("org.apache.kafka.consumer.fetch.manager.records.lag.max", vec![point(v, vec![])]);
        s.record(id, "c1", &payload(vec![lag(5.0), sum(3.0)]), 1000, 10);
        s.record(id, "c1", &payload(vec![lag(2.0), sum(4.0)]), 1000, 20);
        let fams = s.families(30);
        assert_eq!(fams.len(), 2);
        let lag = fams.iter().find(|f| f.name.ends_with("lag.max")).unwrap();
        assert_eq!(lag.kind, Kind::Gauge);
        assert_eq!(lag.rows.len(), 1);
        assert_eq!(lag.rows[0].1, 2.0);
        let labels = &lag.rows[0].0;
        assert!(labels.contains(&("client_instance_id".into(), id.to_string())));
        assert!(labels.contains(&("client_id".into(), "c1".into())));
        assert!(labels.contains(&("group_id".into(), "g1".into())));
        assert!(labels.contains(&("client_rack".into(), "r".into())));
        let sum = fams.iter().find(|f| f.kind == Kind::Sum).unwrap();
        assert_eq!(sum.rows[0].1, 7.0);
    }

    #[test]
    fn a_silent_client_expires() {
        let s = TelemetryStore::default();
        s.record(Uuid::new_v4(), "c", &payload(vec![gauge("m", vec![point(1.0, vec![])])]), 1000, 0);
        assert_eq!(s.families(60_000).len(), 1);
        assert!(s.families(60_001).is_empty());
        assert_eq!(s.series_count(), 0);
    }

    #[test]
    fn series_are_capped() {
        let s = TelemetryStore::default();
        let points: Vec<_> = (0..MAX_SERIES + 5).map(|i| point(1.0, vec![kv("partition", &i.to_string())])).collect();
        s.record(Uuid::new_v4(), "c", &payload(vec![gauge("m", points)]), 1000, 0);
        assert_eq!(s.series_count(), MAX_SERIES);
        assert_eq!(s.dropped_series(), 5);
        s.record(Uuid::new_v4(), "d", &payload(vec![gauge("m", vec![point(1.0, vec![])])]), 1000, 0);
        assert_eq!(s.series_count(), MAX_SERIES);
        assert_eq!(s.dropped_series(), 6);
    }

    #[test]
    fn help_has_no_line_breaks_or_escapes() {
        assert_eq!(help("a\nb\\c"), "a b c");
    }

    #[test]
    fn names_are_sanitised() {
        assert_eq!(
            sanitise("org.apache.kafka.producer.request.latency.avg"),
            "org_apache_kafka_producer_request_latency_avg"
        );
        assert_eq!(sanitise("9a-b"), "_9a_b");
    }
}
