//! Sends the produce spans of [`crate::traces`] to an OpenTelemetry collector over
//! OTLP/HTTP (protobuf, `POST <path>` with `Content-Type: application/x-protobuf`), in
//! batches of at most [`EXPORT_BATCH`], once a second or as soon as a batch is full, as
//! OpenTelemetry's batch span processor does. One export at a time, each bounded by
//! [`EXPORT_TIMEOUT`]; a refused or failed export drops its spans (counted, logged at
//! warn the first time and then at every power of two), so a slow or absent collector
//! never holds up a produce: the queue in front of it is bounded and never waited on.
//!
//! The message types are the part of opentelemetry-proto's `trace/v1/trace.proto` and
//! `collector/trace/v1/trace_service.proto` that runnel writes; the field numbers are
//! OTLP's, the types are declared here (the common types are `telemetry::otlp`'s).

use std::sync::Arc;
use std::time::Duration;

use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::broadcast;

use crate::telemetry::otlp::{AnyValue, KeyValue, Resource, Value};
use crate::traces::{OtlpEndpoint, ProduceSpan, SpanQueue, EXPORT_BATCH};

/// One export request, answer included, at most (the OTLP exporters' default timeout).
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// Spans are sent at least this often while any wait (BatchSpanProcessor's
/// `scheduledDelayMillis` is 5 s; a broker's spans are wanted sooner).
pub const EXPORT_INTERVAL: Duration = Duration::from_secs(1);
/// The collector's answer is read this far at most (its body is not needed).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

#[derive(Clone, PartialEq, Message)]
pub struct ExportTraceServiceRequest {
    #[prost(message, repeated, tag = "1")]
    pub resource_spans: Vec<ResourceSpans>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ResourceSpans {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub scope_spans: Vec<ScopeSpans>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ScopeSpans {
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    #[prost(message, repeated, tag = "2")]
    pub spans: Vec<Span>,
}

#[derive(Clone, PartialEq, Message)]
pub struct InstrumentationScope {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub version: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct Span {
    #[prost(bytes = "vec", tag = "1")]
    pub trace_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub span_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "4")]
    pub parent_span_id: Vec<u8>,
    #[prost(string, tag = "5")]
    pub name: String,
    /// SpanKind: 1 INTERNAL, 2 SERVER.
    #[prost(int32, tag = "6")]
    pub kind: i32,
    #[prost(fixed64, tag = "7")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "8")]
    pub end_time_unix_nano: u64,
    #[prost(message, repeated, tag = "9")]
    pub attributes: Vec<KeyValue>,
    #[prost(message, optional, tag = "15")]
    pub status: Option<Status>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Status {
    #[prost(string, tag = "2")]
    pub message: String,
    /// StatusCode: 0 UNSET, 1 OK, 2 ERROR.
    #[prost(int32, tag = "3")]
    pub code: i32,
}

const SPAN_KIND_INTERNAL: i32 = 1;
const SPAN_KIND_SERVER: i32 = 2;
const STATUS_ERROR: i32 = 2;

fn attr(key: &str, value: Value) -> KeyValue {
    KeyValue { key: key.to_owned(), value: Some(AnyValue { value: Some(value) }) }
}

fn text(key: &str, value: impl Into<String>) -> KeyValue {
    attr(key, Value::String(value.into()))
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The acks a span is tagged with, as a Kafka user writes them.
fn acks_name(acks: i16) -> String {
    match acks {
        -1 => "all".to_owned(),
        n => n.to_string(),
    }
}

/// A produce span, and for acks=all its child span for the wait after the local append.
fn spans_of(s: &ProduceSpan) -> Vec<Span> {
    let end = s.start_unix_nanos.saturating_add(nanos(s.duration));
    let mut attributes = vec![
        text("messaging.system", "kafka"),
        text("messaging.operation.type", "send"),
        text("messaging.operation.name", "produce"),
        text("messaging.client.id", s.client_id.clone()),
        text("runnel.acks", acks_name(s.acks)),
        attr("runnel.partitions", Value::Int(i64::from(s.partitions))),
    ];
    if let [only] = s.topics.as_slice() {
        attributes.push(text("messaging.destination.name", only.clone()));
    }
    attributes.push(text("runnel.topics", s.topics.join(",")));
    let status = s.error_code.map(|code| {
        attributes.push(attr("error.type", Value::String(code.to_string())));
        Status { message: format!("a partition answered Kafka error code {code}"), code: STATUS_ERROR }
    });
    let root = Span {
        trace_id: s.trace_id.to_vec(),
        span_id: s.span_id.to_vec(),
        parent_span_id: Vec::new(),
        name: "produce".to_owned(),
        kind: SPAN_KIND_SERVER,
        start_time_unix_nano: s.start_unix_nanos,
        end_time_unix_nano: end,
        attributes,
        status,
    };
    let mut out = vec![root];
    if s.acks == -1 {
        // The child's id: the parent's with its bytes reversed (unique within the trace,
        // and never all zero since the parent's is not).
        let mut child_id = s.span_id;
        child_id.reverse();
        if child_id == s.span_id {
            child_id[0] ^= 0xff;
        }
        out.push(Span {
            trace_id: s.trace_id.to_vec(),
            span_id: child_id.to_vec(),
            parent_span_id: s.span_id.to_vec(),
            name: "produce.await_in_sync_replicas".to_owned(),
            kind: SPAN_KIND_INTERNAL,
            start_time_unix_nano: s.start_unix_nanos.saturating_add(nanos(s.appended_after)),
            end_time_unix_nano: end,
            attributes: vec![text("runnel.acks", "all")],
            status: None,
        });
    }
    out
}

/// The export request for `spans` of broker `node_id`.
pub fn encode(spans: &[ProduceSpan], node_id: i32) -> Vec<u8> {
    let resource = Resource {
        attributes: vec![
            text("service.name", "runnel"),
            text("service.version", env!("CARGO_PKG_VERSION")),
            text("service.instance.id", node_id.to_string()),
        ],
    };
    let scope = InstrumentationScope { name: "runnel".to_owned(), version: env!("CARGO_PKG_VERSION").to_owned() };
    let request = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource),
            scope_spans: vec![ScopeSpans { scope: Some(scope), spans: spans.iter().flat_map(spans_of).collect() }],
        }],
    };
    request.encode_to_vec()
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("cannot reach the collector at {at}: {source}")]
    Connect { at: String, source: std::io::Error },
    #[error("the collector's connection failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("no answer from the collector within {0:?}")]
    Timeout(Duration),
    #[error("the collector answered `{0}`")]
    Status(String),
    #[error("the collector's answer is not HTTP")]
    NotHttp,
}

/// POST `body` to `endpoint`; Ok once it answered 2xx. One connection per export
/// (`Connection: close`): at most one a second, and nothing to keep alive in between.
pub async fn post(endpoint: &OtlpEndpoint, body: &[u8]) -> Result<(), ExportError> {
    tokio::time::timeout(EXPORT_TIMEOUT, post_now(endpoint, body))
        .await
        .unwrap_or(Err(ExportError::Timeout(EXPORT_TIMEOUT)))
}

async fn post_now(endpoint: &OtlpEndpoint, body: &[u8]) -> Result<(), ExportError> {
    let at = format!("{}:{}", endpoint.host, endpoint.port);
    let mut stream = tokio::net::TcpStream::connect((endpoint.host.as_str(), endpoint.port))
        .await
        .map_err(|source| ExportError::Connect { at: at.clone(), source })?;
    let host = if endpoint.host.contains(':') { format!("[{}]:{}", endpoint.host, endpoint.port) } else { at };
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\n\
         User-Agent: runnel/{}\r\nConnection: close\r\n\r\n",
        endpoint.path,
        body.len(),
        env!("CARGO_PKG_VERSION")
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    stream.flush().await?;
    // The status line is all that matters; read until it is complete (bounded).
    let mut answer = Vec::with_capacity(256);
    let mut chunk = [0u8; 4096];
    let line_end = loop {
        if let Some(i) = answer.windows(2).position(|w| w == b"\r\n") {
            break i;
        }
        if answer.len() >= MAX_ANSWER_BYTES {
            return Err(ExportError::NotHttp);
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(ExportError::NotHttp);
        }
        answer.extend_from_slice(&chunk[..n]);
    };
    let line = String::from_utf8_lossy(&answer[..line_end]).into_owned();
    let mut parts = line.split_whitespace();
    let (Some(version), Some(code)) = (parts.next(), parts.next()) else { return Err(ExportError::NotHttp) };
    if !version.starts_with("HTTP/1.") {
        return Err(ExportError::NotHttp);
    }
    match code.parse::<u16>() {
        Ok(200..=299) => Ok(()),
        Ok(_) => Err(ExportError::Status(line)),
        Err(_) => Err(ExportError::NotHttp),
    }
}

/// Exports from `queue` until `shutdown`, then sends what waits once more (bounded by
/// [`EXPORT_TIMEOUT`] per batch) and returns.
pub async fn run(queue: Arc<SpanQueue>, endpoint: OtlpEndpoint, node_id: i32, mut shutdown: broadcast::Receiver<()>) {
    tracing::info!(endpoint = %format!("http://{}:{}{}", endpoint.host, endpoint.port, endpoint.path), "exporting produce spans over OTLP/HTTP");
    let mut failures = 0u64;
    loop {
        let stopping = tokio::select! {
            _ = tokio::time::sleep(EXPORT_INTERVAL) => false,
            _ = queue.batch_ready() => false,
            _ = shutdown.recv() => true,
        };
        loop {
            let batch = queue.take(EXPORT_BATCH);
            if batch.is_empty() {
                break;
            }
            match post(&endpoint, &encode(&batch, node_id)).await {
                Ok(()) => {
                    if failures > 0 {
                        tracing::info!(failures, "OTLP collector takes spans again");
                    }
                    failures = 0;
                    queue.note_exported(batch.len());
                }
                Err(e) => {
                    failures += 1;
                    queue.note_dropped(batch.len());
                    if failures.is_power_of_two() {
                        tracing::warn!(error = %e, failures, dropped = batch.len(), "OTLP span export failed");
                    }
                    // A collector that is down is not asked again before the next tick.
                    break;
                }
            }
        }
        if stopping {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(acks: i16, error_code: Option<i16>) -> ProduceSpan {
        ProduceSpan {
            trace_id: [7; 16],
            span_id: [1, 2, 3, 4, 5, 6, 7, 8],
            start_unix_nanos: 1_000,
            appended_after: Duration::from_nanos(300),
            duration: Duration::from_nanos(900),
            acks,
            client_id: "app".into(),
            topics: vec!["orders".into()],
            partitions: 2,
            error_code,
        }
    }

    fn value(kv: &[KeyValue], key: &str) -> Option<String> {
        kv.iter().find(|a| a.key == key).and_then(KeyValue::text)
    }

    #[test]
    fn acks_all_has_a_child_span_for_the_replicas_wait() {
        let decoded = ExportTraceServiceRequest::decode(encode(&[span(-1, None), span(1, Some(6))], 3).as_slice())
            .expect("decodes");
        let rs = &decoded.resource_spans[0];
        assert_eq!(value(&rs.resource.as_ref().unwrap().attributes, "service.instance.id").as_deref(), Some("3"));
        let spans = &rs.scope_spans[0].spans;
        assert_eq!(spans.len(), 3, "acks=all: two spans; acks=1: one");
        let (root, child, other) = (&spans[0], &spans[1], &spans[2]);
        assert_eq!((root.name.as_str(), root.start_time_unix_nano, root.end_time_unix_nano), ("produce", 1_000, 1_900));
        assert_eq!(value(&root.attributes, "runnel.acks").as_deref(), Some("all"));
        assert_eq!(value(&root.attributes, "messaging.destination.name").as_deref(), Some("orders"));
        assert_eq!(child.parent_span_id, root.span_id);
        assert_eq!(child.trace_id, root.trace_id);
        assert_ne!(child.span_id, root.span_id);
        assert_eq!((child.start_time_unix_nano, child.end_time_unix_nano), (1_300, 1_900));
        assert_eq!(value(&other.attributes, "runnel.acks").as_deref(), Some("1"));
        assert_eq!(other.status.as_ref().map(|s| s.code), Some(STATUS_ERROR));
        assert_eq!(value(&other.attributes, "error.type").as_deref(), Some("6"));
        assert!(root.status.is_none());
    }

    #[test]
    fn a_palindromic_span_id_still_gives_the_child_another_id() {
        let mut s = span(-1, None);
        s.span_id = [9; 8];
        let spans = spans_of(&s);
        assert_ne!(spans[1].span_id, spans[0].span_id);
    }

    async fn collector(answer: &'static str) -> (OtlpEndpoint, tokio::task::JoinHandle<Vec<u8>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            // Head, then the body its Content-Length names.
            loop {
                let n = s.read(&mut buf).await.unwrap();
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len: usize = text
                        .lines()
                        .find_map(|l| l.strip_prefix("Content-Length: "))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap();
                    if got.len() >= end + 4 + len {
                        break;
                    }
                }
                assert!(n > 0, "closed early");
            }
            s.write_all(answer.as_bytes()).await.unwrap();
            got
        });
        (OtlpEndpoint { host: "127.0.0.1".into(), port, path: "/v1/traces".into() }, task)
    }

    #[tokio::test]
    async fn post_sends_protobuf_and_reads_the_status() {
        let (endpoint, seen) = collector("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").await;
        post(&endpoint, b"\x0a\x00").await.expect("accepted");
        let request = String::from_utf8_lossy(&seen.await.unwrap()).to_string();
        assert!(request.starts_with("POST /v1/traces HTTP/1.1\r\n"), "{request}");
        assert!(request.contains("Content-Type: application/x-protobuf\r\n"), "{request}");
        assert!(request.ends_with("\r\n\r\n\x0a\x00"), "{request:?}");

        let (endpoint, _) = collector("HTTP/1.1 503 Service Unavailable\r\n\r\n").await;
        let e = post(&endpoint, b"").await.unwrap_err();
        assert!(matches!(&e, ExportError::Status(l) if l.contains("503")), "{e}");

        let (endpoint, _) = collector("SSH-2.0-nope\r\n").await;
        assert!(matches!(post(&endpoint, b"").await, Err(ExportError::NotHttp)));
    }

    #[tokio::test]
    async fn an_absent_collector_drops_the_spans_and_counts_them() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let endpoint = OtlpEndpoint { host: "127.0.0.1".into(), port, path: "/v1/traces".into() };
        let queue = Arc::new(SpanQueue::new());
        queue.push(span(1, None));
        let (stop, stopped) = broadcast::channel(1);
        let task = tokio::spawn(run(queue.clone(), endpoint, 1, stopped));
        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(30), task).await.expect("stops").unwrap();
        assert_eq!((queue.exported(), queue.dropped(), queue.len()), (0, 1, 0));
    }
}
