//! Produce tracing: one span per Kafka Produce request, from its decoding to its answer
//! being ready, with a child span for the wait that acks=all adds after the local append
//! (the in-sync replicas confirming, through the high watermark; in fsync mode, the
//! fsync). The spans wait in a bounded [`SpanQueue`]; `server::otlp_traces` takes them
//! in batches and sends them to an OpenTelemetry collector (OTLP/HTTP) when an endpoint
//! is configured. Without one there is no queue, and a produce costs one `Option` check.
//!
//! A leaf module like [`crate::metrics`]: `protocol` records into it, `server` drains it.
//! Recording never blocks and never waits: a full queue drops the span and counts it.
//!
//! Kafka clients carry no trace context in the protocol (a `traceparent` header, if any,
//! is inside a record batch, which the broker does not open), so every produce starts a
//! trace of its own.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Spans waiting for export at most (OpenTelemetry's BatchSpanProcessor default
/// `maxQueueSize`); more are dropped.
pub const QUEUE_CAPACITY: usize = 2048;

/// One finished produce request.
#[derive(Debug, Clone, PartialEq)]
pub struct ProduceSpan {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    /// Unix time of the request's decoding, in nanoseconds.
    pub start_unix_nanos: u64,
    /// From the start: the local appends done (the acks=all wait starts here).
    pub appended_after: Duration,
    /// From the start: the answer ready (or, for acks=0, the request done).
    pub duration: Duration,
    /// As sent: 0, 1 or -1 (all); anything else was refused with INVALID_REQUIRED_ACKS.
    pub acks: i16,
    pub client_id: String,
    /// The topics named, in request order (at most [`MAX_TOPICS_NAMED`]).
    pub topics: Vec<String>,
    pub partitions: u32,
    /// The first partition error code that is not 0, if any.
    pub error_code: Option<i16>,
}

/// A span names this many topics at most (a request may name thousands).
pub const MAX_TOPICS_NAMED: usize = 8;

impl ProduceSpan {
    /// A span that starts now, with fresh random ids.
    pub fn start() -> SpanStart {
        let ids = uuid::Uuid::new_v4().into_bytes();
        let span = uuid::Uuid::new_v4().into_bytes();
        let mut span_id = [0u8; 8];
        span_id.copy_from_slice(&span[..8]);
        let start_unix_nanos =
            SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        SpanStart { trace_id: ids, span_id, start_unix_nanos, started: std::time::Instant::now() }
    }
}

/// What is known when a produce request starts.
#[derive(Debug, Clone, Copy)]
pub struct SpanStart {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub start_unix_nanos: u64,
    pub started: std::time::Instant,
}

/// Finished spans waiting for the exporter, and what became of the others.
#[derive(Debug, Default)]
pub struct SpanQueue {
    spans: Mutex<VecDeque<ProduceSpan>>,
    dropped: AtomicU64,
    exported: AtomicU64,
    wake: tokio::sync::Notify,
}

impl SpanQueue {
    pub fn new() -> SpanQueue {
        SpanQueue::default()
    }

    /// Queue `span`, or count it dropped when [`QUEUE_CAPACITY`] spans wait already.
    pub fn push(&self, span: ProduceSpan) {
        let mut q = self.spans.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() >= QUEUE_CAPACITY {
            drop(q);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        q.push_back(span);
        let len = q.len();
        drop(q);
        if len >= EXPORT_BATCH {
            self.wake.notify_one();
        }
    }

    /// Up to `max` of the oldest spans.
    pub fn take(&self, max: usize) -> Vec<ProduceSpan> {
        let mut q = self.spans.lock().unwrap_or_else(|e| e.into_inner());
        let n = q.len().min(max);
        q.drain(..n).collect()
    }

    pub fn len(&self) -> usize {
        self.spans.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resolves when a full batch is waiting (or at once, if one was signalled before).
    pub async fn batch_ready(&self) {
        self.wake.notified().await;
    }

    /// Count `n` spans the collector accepted.
    pub fn note_exported(&self, n: usize) {
        self.exported.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Count `n` spans lost (the queue was full, or the collector did not take them).
    pub fn note_dropped(&self, n: usize) {
        self.dropped.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub fn exported(&self) -> u64 {
        self.exported.load(Ordering::Relaxed)
    }

    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// Spans per export request at most (BatchSpanProcessor's `maxExportBatchSize`).
pub const EXPORT_BATCH: usize = 512;

/// Where spans go: an OTLP/HTTP collector (`http://host[:port][/path]`; the port
/// defaults to OTLP/HTTP's 4318, an empty path to `/v1/traces`, as OpenTelemetry's
/// `OTEL_EXPORTER_OTLP_ENDPOINT` rules say). Plain HTTP only: TLS is not built in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpEndpoint {
    pub host: String,
    pub port: u16,
    pub path: String,
}

impl OtlpEndpoint {
    pub fn parse(url: &str) -> Result<OtlpEndpoint, String> {
        let rest = url.trim().strip_prefix("http://").ok_or_else(|| {
            if url.trim().starts_with("https://") {
                format!(
                    "`{url}`: https is not supported (use an http:// collector, e.g. a local OpenTelemetry Collector)"
                )
            } else {
                format!("`{url}` is not an http://host[:port][/path] URL")
            }
        })?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let port_of = |p: &str| p.parse::<u16>().map_err(|_| format!("`{url}`: `{p}` is not a port"));
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or_else(|| format!("`{url}`: unclosed `[`"))?;
            match after.strip_prefix(':') {
                Some(p) => (h, port_of(p)?),
                None if after.is_empty() => (h, 4318),
                None => return Err(format!("`{url}` is not an http://host[:port][/path] URL")),
            }
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, port_of(p)?),
                None => (authority, 4318),
            }
        };
        if host.is_empty() || port == 0 {
            return Err(format!("`{url}` names no host and port"));
        }
        if path.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err(format!("`{url}`: the path has spaces or control characters"));
        }
        let path = if path.is_empty() || path == "/" { "/v1/traces".to_owned() } else { path.to_owned() };
        Ok(OtlpEndpoint { host: host.to_owned(), port, path })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(n: u32) -> ProduceSpan {
        let s = ProduceSpan::start();
        ProduceSpan {
            trace_id: s.trace_id,
            span_id: s.span_id,
            start_unix_nanos: s.start_unix_nanos,
            appended_after: Duration::from_micros(10),
            duration: Duration::from_micros(20),
            acks: -1,
            client_id: "c".into(),
            topics: vec!["t".into()],
            partitions: n,
            error_code: None,
        }
    }

    #[test]
    fn a_full_queue_drops_and_counts_and_take_is_oldest_first() {
        let q = SpanQueue::new();
        for n in 0..QUEUE_CAPACITY as u32 + 3 {
            q.push(span(n));
        }
        assert_eq!((q.len(), q.dropped()), (QUEUE_CAPACITY, 3));
        let first = q.take(2);
        assert_eq!(first.iter().map(|s| s.partitions).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(q.take(usize::MAX).len(), QUEUE_CAPACITY - 2);
        assert!(q.is_empty());
    }

    #[test]
    fn ids_are_fresh_and_nonzero() {
        let (a, b) = (ProduceSpan::start(), ProduceSpan::start());
        assert_ne!(a.trace_id, b.trace_id);
        assert_ne!(a.span_id, b.span_id);
        assert!(a.trace_id.iter().any(|b| *b != 0) && a.span_id.iter().any(|b| *b != 0));
        assert!(a.start_unix_nanos > 1_700_000_000_000_000_000);
    }

    #[tokio::test]
    async fn a_full_batch_wakes_the_exporter() {
        let q = std::sync::Arc::new(SpanQueue::new());
        for n in 0..EXPORT_BATCH as u32 {
            q.push(span(n));
        }
        tokio::time::timeout(Duration::from_secs(5), q.batch_ready()).await.expect("woken");
    }

    #[test]
    fn endpoints_parse_as_opentelemetry_says() {
        let e = |h: &str, p: u16, path: &str| Ok(OtlpEndpoint { host: h.into(), port: p, path: path.into() });
        assert_eq!(OtlpEndpoint::parse("http://127.0.0.1:4318"), e("127.0.0.1", 4318, "/v1/traces"));
        assert_eq!(OtlpEndpoint::parse("http://collector"), e("collector", 4318, "/v1/traces"));
        assert_eq!(OtlpEndpoint::parse("http://collector:9/"), e("collector", 9, "/v1/traces"));
        assert_eq!(OtlpEndpoint::parse("http://[::1]:55/custom/traces"), e("::1", 55, "/custom/traces"));
        assert_eq!(OtlpEndpoint::parse("http://[::1]"), e("::1", 4318, "/v1/traces"));
        for bad in ["collector:4318", "https://c:4318", "http://:4318", "http://c:x", "http://c:0", "http://c/a b"] {
            assert!(OtlpEndpoint::parse(bad).is_err(), "{bad}");
        }
    }
}
