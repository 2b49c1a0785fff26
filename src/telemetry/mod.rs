//! KIP-714 client telemetry: clients ask which metrics to push
//! (GetTelemetrySubscriptions), push them as OTLP `MetricsData` (PushTelemetry), and the
//! broker shows the latest values on `/metrics`.
//!
//! * `manager.rs`: Kafka's `ClientMetricsManager`: instances, their subscription, the
//!   checks on both requests (a pure state machine; time comes in).
//! * `otlp.rs`: the OTLP protobuf types runnel reads.
//! * `store.rs`: the latest value of each pushed series, bounded and expiring.
//!
//! Subscriptions are CLIENT_METRICS config resources in the metadata image
//! ([`crate::controller::client_metrics`]).

pub mod manager;
pub mod otlp;
pub mod store;

use uuid::Uuid;

use crate::controller::client_metrics::Subscription;
use crate::controller::MetadataImage;
use crate::storage::batch::Compression;
use crate::storage::codec::{self, DecompressError};
pub use manager::{ClientMetadata, ClientMetricsManager, SubscriptionAnswer, ACCEPTED_COMPRESSION_TYPES};
pub use store::TelemetryStore;

/// Kafka's `telemetry.max.bytes` default: 1 MiB.
pub const TELEMETRY_MAX_BYTES_DEFAULT: i32 = 1024 * 1024;

/// Why a telemetry request was refused; `protocol` maps each to its Kafka error code.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TelemetryError {
    #[error("{0}")]
    InvalidRequest(String),
    #[error("request arrived before the next push interval")]
    Throttled,
    #[error("unknown client subscription id")]
    UnknownSubscriptionId,
    #[error("unsupported compression type")]
    UnsupportedCompression,
    #[error("telemetry payload is larger than telemetry.max.bytes")]
    TooLarge,
    /// The payload does not decompress or is not OTLP metrics (Kafka's INVALID_RECORD,
    /// which tells the client to stop pushing).
    #[error("{0}")]
    InvalidRecord(String),
}

/// The broker's telemetry state.
#[derive(Debug)]
pub struct Telemetry {
    pub manager: ClientMetricsManager,
    pub store: TelemetryStore,
    /// `telemetry.max.bytes`: the largest payload accepted, compressed or not.
    pub max_bytes: i32,
    /// The subscriptions parsed (their patterns compiled) from the image at this
    /// metadata offset, so that a request compiles no regex unless metadata changed.
    parsed: std::sync::Mutex<Option<(u64, std::sync::Arc<Vec<Subscription>>)>>,
}

impl Default for Telemetry {
    fn default() -> Self {
        Telemetry::new(TELEMETRY_MAX_BYTES_DEFAULT)
    }
}

/// A PushTelemetry request, decoded.
#[derive(Debug, Clone)]
pub struct Push<'a> {
    pub client_instance_id: Uuid,
    pub subscription_id: i32,
    pub terminating: bool,
    pub compression_type: i8,
    pub metrics: &'a [u8],
}

/// The subscriptions in `image` (those that do not parse, which only a hand-edited log
/// holds, are left out).
pub fn subscriptions(image: &MetadataImage) -> Vec<Subscription> {
    image.client_metrics.iter().filter_map(|(name, configs)| Subscription::parse(name, configs)).collect()
}

impl Telemetry {
    pub fn new(max_bytes: i32) -> Telemetry {
        Telemetry {
            manager: ClientMetricsManager::default(),
            store: TelemetryStore::default(),
            max_bytes,
            parsed: Default::default(),
        }
    }

    /// The image's subscriptions, parsed once per metadata offset.
    fn subscriptions(&self, image: &MetadataImage) -> std::sync::Arc<Vec<Subscription>> {
        let mut parsed = self.parsed.lock().unwrap_or_else(|e| e.into_inner());
        match &*parsed {
            Some((offset, subs)) if *offset == image.offset => subs.clone(),
            _ => {
                let subs = std::sync::Arc::new(subscriptions(image));
                *parsed = Some((image.offset, subs.clone()));
                subs
            }
        }
    }

    fn max_bytes(&self) -> usize {
        usize::try_from(self.max_bytes).unwrap_or(0)
    }

    /// GetTelemetrySubscriptions.
    pub fn get_subscription(
        &self,
        client_instance_id: Uuid,
        image: &MetadataImage,
        metadata: ClientMetadata,
        now_ms: i64,
    ) -> Result<SubscriptionAnswer, TelemetryError> {
        self.manager.get_subscription(client_instance_id, &self.subscriptions(image), metadata, now_ms)
    }

    /// PushTelemetry: the checks, then the payload decompressed (within
    /// `telemetry.max.bytes`), decoded and stored.
    pub fn push(
        &self,
        push: Push<'_>,
        image: &MetadataImage,
        metadata: ClientMetadata,
        now_ms: i64,
    ) -> Result<(), TelemetryError> {
        let client_id = metadata.client_id.clone();
        let accepted = self.manager.check_push(
            push.client_instance_id,
            push.subscription_id,
            push.terminating,
            push.compression_type,
            push.metrics.len(),
            self.max_bytes(),
            &self.subscriptions(image),
            metadata,
            now_ms,
        )?;
        if push.metrics.is_empty() {
            return Ok(());
        }
        let decoded = decode_payload(push.compression_type, push.metrics, self.max_bytes());
        match decoded {
            Ok(data) => {
                self.store.record(push.client_instance_id, &client_id, &data, accepted.push_interval_ms, now_ms);
                Ok(())
            }
            Err(e) => {
                self.manager.push_outcome(push.client_instance_id, Some(e.clone()));
                Err(e)
            }
        }
    }
}

/// Decompresses (Kafka's record-batch codecs, the same framing) and decodes a payload.
pub fn decode_payload(
    compression_type: i8,
    payload: &[u8],
    max_bytes: usize,
) -> Result<otlp::MetricsData, TelemetryError> {
    let codec = match compression_type {
        0 => Compression::None,
        1 => Compression::Gzip,
        2 => Compression::Snappy,
        3 => Compression::Lz4,
        4 => Compression::Zstd,
        _ => return Err(TelemetryError::UnsupportedCompression),
    };
    let bytes = match codec {
        Compression::None => None,
        _ => Some(codec::decompress(codec, payload, max_bytes).map_err(|e| match e {
            DecompressError::TooLarge(_) => TelemetryError::TooLarge,
            other => TelemetryError::InvalidRecord(format!("cannot decompress the metrics: {other}")),
        })?),
    };
    otlp::decode(bytes.as_deref().unwrap_or(payload))
        .map_err(|e| TelemetryError::InvalidRecord(format!("the metrics are not OTLP MetricsData: {e}")))
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::otlp::*;
    use super::*;

    fn sample() -> MetricsData {
        let point = NumberDataPoint {
            attributes: vec![],
            start_time_unix_nano: 1,
            time_unix_nano: 2,
            value: Some(Number::AsInt(42)),
        };
        MetricsData {
            resource_metrics: vec![ResourceMetrics {
                resource: None,
                scope_metrics: vec![ScopeMetrics {
                    metrics: vec![Metric {
                        name: "org.apache.kafka.producer.request.latency.avg".into(),
                        description: String::new(),
                        unit: String::new(),
                        data: Some(Data::Gauge(Gauge { data_points: vec![point] })),
                    }],
                }],
            }],
        }
    }

    #[test]
    fn every_accepted_codec_decodes() {
        let raw = sample().encode_to_vec();
        for id in ACCEPTED_COMPRESSION_TYPES.into_iter().chain([0]) {
            let codec =
                [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd]
                    [id as usize];
            let compressed = codec::compress(codec, &raw).unwrap();
            assert_eq!(decode_payload(id, &compressed, 1 << 20).unwrap(), sample(), "codec {id}");
        }
    }

    #[test]
    fn malformed_and_oversized_payloads_are_refused() {
        // A length prefix far beyond the payload: refused, nothing that size allocated.
        let hostile = [0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01];
        assert!(matches!(decode_payload(0, &hostile, 1 << 20), Err(TelemetryError::InvalidRecord(_))));
        assert!(matches!(decode_payload(1, b"not gzip", 1 << 20), Err(TelemetryError::InvalidRecord(_))));
        assert!(matches!(decode_payload(4, b"not zstd", 1 << 20), Err(TelemetryError::InvalidRecord(_))));
        // Small compressed, large decompressed: TELEMETRY_TOO_LARGE, as Kafka's exporter says.
        let mut big = sample();
        big.resource_metrics[0].scope_metrics[0].metrics[0].description = "x".repeat(100_000);
        let compressed = codec::compress(Compression::Gzip, &big.encode_to_vec()).unwrap();
        assert!(compressed.len() < 10_000);
        assert_eq!(decode_payload(1, &compressed, 10_000), Err(TelemetryError::TooLarge));
        assert_eq!(decode_payload(7, &compressed, 10_000), Err(TelemetryError::UnsupportedCompression));
    }

    #[test]
    fn a_push_is_checked_decoded_and_stored() {
        let t = Telemetry::default();
        let mut image = MetadataImage::default();
        for (k, v) in [("metrics", "org.apache.kafka."), ("interval.ms", "1000")] {
            image.apply(&crate::controller::MetadataRecord::ClientMetricsConfig {
                subscription: "s".into(),
                name: k.into(),
                value: Some(v.into()),
            });
        }
        let meta = ClientMetadata { client_id: "p1".into(), ..Default::default() };
        let now = 1_000_000;
        let a = t.get_subscription(Uuid::nil(), &image, meta.clone(), now).unwrap();
        assert_eq!(a.requested_metrics, vec!["org.apache.kafka."]);
        let payload = codec::compress(Compression::Zstd, &sample().encode_to_vec()).unwrap();
        let push = Push {
            client_instance_id: a.client_instance_id,
            subscription_id: a.subscription_id,
            terminating: false,
            compression_type: 4,
            metrics: &payload,
        };
        t.push(push.clone(), &image, meta.clone(), now + 10).unwrap();
        let fams = t.store.families(now + 20);
        assert_eq!(fams.len(), 1);
        assert_eq!(fams[0].rows[0].1, 42.0);
        // Garbage after a good push: INVALID_RECORD, and the stored values stay.
        let garbage = Push { metrics: b"\xff\xff", compression_type: 0, ..push };
        let r = t.push(garbage, &image, meta, now + 2000);
        assert!(matches!(r, Err(TelemetryError::InvalidRecord(_))), "{r:?}");
        assert_eq!(t.store.series_count(), 1);
    }
}
