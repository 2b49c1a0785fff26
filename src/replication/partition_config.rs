//! A topic's settings, typed once per metadata image: each of Kafka's topic configs is
//! the topic's override (a string in the image), else the broker-wide default set at
//! runtime (a dynamic broker config in the image), else the default the config table
//! gives for this broker (`controller/topic_config.rs`: names, types, defaults and
//! validation in one place). Partitions and the produce path read these fields; nothing
//! below this file parses a config string.

use std::collections::BTreeMap;

use super::validated::ProduceLimits;
use crate::config::BrokerConfig;
use crate::controller::broker_config::TopicDefaults;
use crate::controller::topic_config;
use crate::storage::{LogConfig, TimestampBounds};

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
    /// `leader.replication.throttled.replicas`: replicas whose leader-side replication
    /// counts against the leader's replication quota (`replication_quota.rs`).
    pub leader_throttled: ThrottledReplicas,
    /// `follower.replication.throttled.replicas`: the same on the follower's side.
    pub follower_throttled: ThrottledReplicas,
}

/// A throttled-replicas list, parsed: Kafka's "partition:broker" pairs, or `*` for every
/// replica of the topic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ThrottledReplicas {
    #[default]
    None,
    All,
    Listed(Vec<(i32, i32)>),
}

impl ThrottledReplicas {
    /// Items that do not parse (the table refuses them; an older release may have kept
    /// one) throttle nothing.
    pub fn parse(value: &str) -> ThrottledReplicas {
        if value.trim() == "*" {
            return ThrottledReplicas::All;
        }
        let pairs: Vec<(i32, i32)> = value
            .split(',')
            .filter_map(|item| {
                let (p, b) = item.trim().split_once(':')?;
                Some((p.trim().parse().ok()?, b.trim().parse().ok()?))
            })
            .collect();
        if pairs.is_empty() {
            ThrottledReplicas::None
        } else {
            ThrottledReplicas::Listed(pairs)
        }
    }

    /// Whether broker `broker`'s replica of `partition` is throttled.
    pub fn covers(&self, partition: i32, broker: i32) -> bool {
        match self {
            ThrottledReplicas::None => false,
            ThrottledReplicas::All => true,
            ThrottledReplicas::Listed(pairs) => pairs.contains(&(partition, broker)),
        }
    }
}

impl PartitionConfig {
    /// `overrides` (a topic's configs) over `dynamic` (the broker-wide defaults set at
    /// runtime, by topic config name) over the broker's static defaults.
    pub fn resolve(
        broker: &BrokerConfig,
        dynamic: &TopicDefaults,
        overrides: &BTreeMap<String, String>,
    ) -> PartitionConfig {
        let value = |name: &str| -> String {
            overrides.get(name).or_else(|| dynamic.get(name)).cloned().unwrap_or_else(|| default_of(broker, name))
        };
        // What reaches an image was validated against the table; a value that still does
        // not parse (a config written by an older release) falls back to the default.
        let long = |name: &str| -> i64 {
            let parse = |v: String| v.trim().parse::<i64>().ok();
            parse(value(name)).or_else(|| parse(default_of(broker, name))).unwrap_or(0)
        };
        let policy = value("cleanup.policy");
        let has = |p: &str| policy.split(',').any(|x| x.trim() == p);
        let dirty_ratio = value("min.cleanable.dirty.ratio").trim().parse::<f64>().unwrap_or(0.5);
        PartitionConfig {
            log: LogConfig {
                segment_bytes: long("segment.bytes").max(14) as u64,
                segment_ms: long("segment.ms"),
                index_interval_bytes: long("index.interval.bytes").max(0) as u64,
                retention_ms: long("retention.ms"),
                retention_bytes: long("retention.bytes"),
                flush_messages: long("flush.messages"),
                flush_ms: long("flush.ms"),
                max_message_bytes: long("max.message.bytes").max(0) as usize,
                cleanup_delete: has("delete"),
                cleanup_compact: has("compact"),
                delete_retention_ms: long("delete.retention.ms"),
                min_cleanable_dirty_permille: (dirty_ratio.clamp(0.0, 1.0) * 1000.0).round() as u32,
                min_compaction_lag_ms: long("min.compaction.lag.ms"),
                max_compaction_lag_ms: long("max.compaction.lag.ms"),
            },
            log_append_time: value("message.timestamp.type") == "LogAppendTime",
            min_insync_replicas: long("min.insync.replicas").max(1) as usize,
            timestamp_before_max_ms: long("message.timestamp.before.max.ms"),
            timestamp_after_max_ms: long("message.timestamp.after.max.ms"),
            leader_throttled: ThrottledReplicas::parse(&value("leader.replication.throttled.replicas")),
            follower_throttled: ThrottledReplicas::parse(&value("follower.replication.throttled.replicas")),
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

/// The table's default of a topic config this file reads (all of them are in the table;
/// a unit test walks every name).
fn default_of(broker: &BrokerConfig, name: &str) -> String {
    topic_config::find(name).map(|d| d.default_value(broker)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(pairs: &[(&str, &str)]) -> PartitionConfig {
        let broker = BrokerConfig::build(&[]).unwrap();
        let overrides = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        PartitionConfig::resolve(&broker, &TopicDefaults::new(), &overrides)
    }

    #[test]
    fn broker_defaults_without_overrides() {
        let c = resolve(&[]);
        let broker = BrokerConfig::build(&[]).unwrap();
        assert_eq!(c.log.segment_bytes, broker.log_segment_bytes);
        assert_eq!(c.log.retention_ms, broker.log_retention_ms);
        assert_eq!(c.log.flush_messages, broker.flush_interval_messages);
        assert_eq!(c.log.max_message_bytes, broker.message_max_bytes);
        // Kafka's topic defaults, from the one table.
        assert_eq!(c.log.index_interval_bytes, 4096);
        assert_eq!(c.log.delete_retention_ms, 86_400_000);
        assert_eq!(c.log.min_cleanable_dirty_permille, 500);
        assert_eq!(c.log.max_compaction_lag_ms, i64::MAX);
        assert!(c.log.cleanup_delete && !c.log.cleanup_compact);
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

    #[test]
    fn a_dynamic_default_applies_where_the_topic_has_no_value_of_its_own() {
        let broker = BrokerConfig::build(&[]).unwrap();
        let dynamic = TopicDefaults::from([("retention.ms", "1000".to_owned()), ("min.insync.replicas", "2".into())]);
        let own = BTreeMap::from([("retention.ms".to_owned(), "5".to_owned())]);
        let c = PartitionConfig::resolve(&broker, &dynamic, &BTreeMap::new());
        assert_eq!((c.log.retention_ms, c.min_insync_replicas), (1000, 2));
        let c = PartitionConfig::resolve(&broker, &dynamic, &own);
        assert_eq!((c.log.retention_ms, c.min_insync_replicas), (5, 2));
    }

    #[test]
    fn throttled_replicas_name_partition_broker_pairs_or_all() {
        let c = resolve(&[
            ("leader.replication.throttled.replicas", "0:1, 0:2,1:3"),
            ("follower.replication.throttled.replicas", "*"),
        ]);
        assert!(c.leader_throttled.covers(0, 1) && c.leader_throttled.covers(0, 2) && c.leader_throttled.covers(1, 3));
        assert!(!c.leader_throttled.covers(1, 1) && !c.leader_throttled.covers(0, 3));
        assert!(c.follower_throttled.covers(7, 9));
        let none = resolve(&[]);
        assert!(!none.leader_throttled.covers(0, 1) && !none.follower_throttled.covers(0, 1));
        assert_eq!(ThrottledReplicas::parse("x:1,junk"), ThrottledReplicas::None);
    }

    /// Every name `resolve` reads is in the config table, and writing the table's defaults
    /// out as overrides changes nothing.
    #[test]
    fn reads_only_table_configs_and_defaults_agree() {
        let src = include_str!("partition_config.rs");
        let body = &src[src.find("pub fn resolve").unwrap()..src.find("pub fn produce_limits").unwrap()];
        let names: Vec<&str> = body.split('"').skip(1).step_by(2).filter(|n| n.contains('.')).collect();
        assert!(names.len() >= 16, "{names:?}");
        let broker = BrokerConfig::build(&[]).unwrap();
        let mut all = Vec::new();
        for name in names {
            let def = topic_config::find(name).unwrap_or_else(|| panic!("{name} is not in the table"));
            all.push((name, def.default_value(&broker)));
        }
        let pairs: Vec<(&str, &str)> = all.iter().map(|(n, v)| (*n, v.as_str())).collect();
        assert_eq!(resolve(&pairs), resolve(&[]));
    }
}
