//! A topic's settings, typed once per metadata image: the topic's overrides (Kafka's
//! config names, as strings in the image) over the broker's defaults. Partitions and the
//! produce path read these fields; nothing below this file parses a config string.
//! (Validation of the strings themselves, at CreateTopics/AlterConfigs, is the
//! controller's `topic_config.rs`; what reaches an image is already valid.)

use std::collections::BTreeMap;

use super::validated::ProduceLimits;
use crate::config::BrokerConfig;
use crate::storage::{LogConfig, TimestampBounds};

/// Kafka's default `message.timestamp.after.max.ms` (one hour).
const DEFAULT_TIMESTAMP_AFTER_MAX_MS: i64 = 3_600_000;

#[derive(Debug, Clone, PartialEq)]
pub struct PartitionConfig {
    /// What the partition log itself obeys (segments, retention, flush, cleaning).
    pub log: LogConfig,
    /// `message.timestamp.type=LogAppendTime`: the broker stamps batches on append.
    pub log_append_time: bool,
    /// `min.insync.replicas`: an acks=all write needs at least this many in-sync replicas.
    pub min_insync_replicas: usize,
    /// `message.timestamp.before.max.ms`: how far in the past a record's timestamp may be.
    pub timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: how far in the future.
    pub timestamp_after_max_ms: i64,
}

impl PartitionConfig {
    /// The broker's defaults with `overrides` (a topic's configs) applied.
    pub fn resolve(broker: &BrokerConfig, overrides: &BTreeMap<String, String>) -> PartitionConfig {
        let mut c = broker.default_log_config();
        let get = |k: &str| overrides.get(k).map(String::as_str);
        let num = |k: &str| get(k).and_then(|v| v.trim().parse::<i64>().ok());
        if let Some(v) = num("segment.bytes") {
            c.segment_bytes = v.max(14) as u64;
        }
        if let Some(v) = num("segment.ms") {
            c.segment_ms = v;
        }
        if let Some(v) = num("retention.ms") {
            c.retention_ms = v;
        }
        if let Some(v) = num("retention.bytes") {
            c.retention_bytes = v;
        }
        if let Some(v) = num("flush.messages") {
            c.flush_messages = v;
        }
        if let Some(v) = num("flush.ms") {
            c.flush_ms = v;
        }
        if let Some(v) = num("index.interval.bytes") {
            c.index_interval_bytes = v.max(0) as u64;
        }
        if let Some(v) = num("max.message.bytes") {
            c.max_message_bytes = v.max(0) as usize;
        }
        if let Some(policy) = get("cleanup.policy") {
            let has = |p: &str| policy.split(',').any(|x| x.trim() == p);
            c.cleanup_delete = has("delete");
            c.cleanup_compact = has("compact");
        }
        if let Some(v) = num("delete.retention.ms") {
            c.delete_retention_ms = v;
        }
        if let Some(v) = num("min.compaction.lag.ms") {
            c.min_compaction_lag_ms = v;
        }
        if let Some(v) = num("max.compaction.lag.ms") {
            c.max_compaction_lag_ms = v;
        }
        if let Some(v) = get("min.cleanable.dirty.ratio").and_then(|v| v.trim().parse::<f64>().ok()) {
            c.min_cleanable_dirty_permille = (v.clamp(0.0, 1.0) * 1000.0).round() as u32;
        }
        PartitionConfig {
            log: c,
            log_append_time: get("message.timestamp.type") == Some("LogAppendTime"),
            min_insync_replicas: num("min.insync.replicas").unwrap_or(i64::from(broker.min_insync_replicas)).max(1)
                as usize,
            timestamp_before_max_ms: num("message.timestamp.before.max.ms").unwrap_or(i64::MAX),
            timestamp_after_max_ms: num("message.timestamp.after.max.ms").unwrap_or(DEFAULT_TIMESTAMP_AFTER_MAX_MS),
        }
    }

    /// What a client's Produce must satisfy on this topic at `now_ms`.
    pub fn produce_limits(&self, now_ms: i64) -> ProduceLimits {
        ProduceLimits {
            max_message_bytes: self.log.max_message_bytes,
            timestamps: Some(TimestampBounds {
                now_ms,
                before_max_ms: self.timestamp_before_max_ms,
                after_max_ms: self.timestamp_after_max_ms,
            }),
            require_keys: self.log.cleanup_compact,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(pairs: &[(&str, &str)]) -> PartitionConfig {
        let broker = BrokerConfig::build(&[]).unwrap();
        let overrides = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        PartitionConfig::resolve(&broker, &overrides)
    }

    #[test]
    fn broker_defaults_without_overrides() {
        let c = resolve(&[]);
        let broker = BrokerConfig::build(&[]).unwrap();
        assert_eq!(c.log, broker.default_log_config());
        assert_eq!(c.min_insync_replicas, broker.min_insync_replicas as usize);
        assert!(!c.log_append_time);
        assert_eq!(c.timestamp_after_max_ms, 3_600_000);
        assert_eq!(c.timestamp_before_max_ms, i64::MAX);
    }

    #[test]
    fn topic_overrides_win() {
        let c = resolve(&[
            ("cleanup.policy", "compact"),
            ("min.insync.replicas", "2"),
            ("message.timestamp.type", "LogAppendTime"),
            ("message.timestamp.before.max.ms", "1000"),
            ("max.message.bytes", "5000"),
        ]);
        assert!(c.log.cleanup_compact && !c.log.cleanup_delete);
        assert_eq!(c.min_insync_replicas, 2);
        assert!(c.log_append_time);
        let limits = c.produce_limits(10);
        assert!(limits.require_keys);
        assert_eq!(limits.max_message_bytes, 5000);
        assert_eq!(limits.timestamps.unwrap().before_max_ms, 1000);
    }
}
