//! Topic-level configs: names, types, validation and defaults, as Kafka defines them.

use crate::config::BrokerConfig;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean,
    String,
    Int,
    Short,
    Long,
    Double,
    List,
    Class,
}

impl ConfigType {
    /// The `config_type` code DescribeConfigs v3+ reports.
    pub fn code(self) -> i8 {
        match self {
            ConfigType::Boolean => 1,
            ConfigType::String => 2,
            ConfigType::Int => 3,
            ConfigType::Short => 4,
            ConfigType::Long => 5,
            ConfigType::Double => 6,
            ConfigType::List => 7,
            ConfigType::Class => 8,
        }
    }
    fn name(self) -> &'static str {
        match self {
            ConfigType::Boolean => "BOOLEAN",
            ConfigType::String => "STRING",
            ConfigType::Int => "INT",
            ConfigType::Short => "SHORT",
            ConfigType::Long => "LONG",
            ConfigType::Class => "CLASS",
            ConfigType::Double => "DOUBLE",
            ConfigType::List => "LIST",
        }
    }
}

pub struct TopicConfigDef {
    pub name: &'static str,
    pub ty: ConfigType,
    /// The broker-level config this one defaults from (Kafka's synonym), if Kafka reports
    /// it as a synonym (it does not for configs whose broker default is in other units,
    /// like retention.ms ← log.retention.hours).
    pub broker_synonym: Option<&'static str>,
    pub doc: &'static str,
    min: Option<f64>,
    max: Option<f64>,
    choices: &'static [&'static str],
    default: fn(&BrokerConfig) -> String,
}

const LONG_MAX: &str = "9223372036854775807";

macro_rules! def {
    ($name:expr, $ty:ident, $syn:expr, $min:expr, $max:expr, $choices:expr, $default:expr, $doc:expr) => {
        TopicConfigDef {
            name: $name,
            ty: ConfigType::$ty,
            broker_synonym: $syn,
            doc: $doc,
            min: $min,
            max: $max,
            choices: $choices,
            default: $default,
        }
    };
}

/// Every topic config runnel accepts, sorted by name.
pub static TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def!(
        "cleanup.policy",
        List,
        Some("log.cleanup.policy"),
        None,
        None,
        &["delete", "compact"],
        |_| "delete".into(),
        "Retention policy for old segments: delete and/or compact."
    ),
    def!(
        "compression.type",
        String,
        Some("compression.type"),
        None,
        None,
        &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"],
        |_| "producer".into(),
        "Final compression type for the topic; producer keeps the producer's codec."
    ),
    def!(
        "delete.retention.ms",
        Long,
        Some("log.cleaner.delete.retention.ms"),
        Some(0.0),
        None,
        &[],
        |_| "86400000".into(),
        "How long tombstones are retained in compacted topics."
    ),
    def!(
        "file.delete.delay.ms",
        Long,
        Some("log.segment.delete.delay.ms"),
        Some(0.0),
        None,
        &[],
        |_| "60000".into(),
        "Delay before deleting a file from the filesystem."
    ),
    def!(
        "flush.messages",
        Long,
        Some("log.flush.interval.messages"),
        Some(1.0),
        None,
        &[],
        |b| b.flush_interval_messages.to_string(),
        "Force an fsync after this many messages."
    ),
    def!(
        "flush.ms",
        Long,
        None,
        Some(0.0),
        None,
        &[],
        |b| b.flush_interval_ms.to_string(),
        "Force an fsync after this much time."
    ),
    def!(
        "follower.replication.throttled.replicas",
        List,
        None,
        None,
        None,
        &[],
        |_| String::new(),
        "A list of replicas for which log replication should be throttled on the follower side, in the format [PartitionId]:[BrokerId],[PartitionId]:[BrokerId]:... or the wildcard '*' to throttle all replicas of this topic; the bound is the follower.replication.throttled.rate broker config."
    ),
    def!(
        "index.interval.bytes",
        Int,
        Some("log.index.interval.bytes"),
        Some(0.0),
        None,
        &[],
        |_| "4096".into(),
        "Bytes of log between offset index entries."
    ),
    def!(
        "leader.replication.throttled.replicas",
        List,
        None,
        None,
        None,
        &[],
        |_| String::new(),
        "A list of replicas for which log replication should be throttled on the leader side, in the format [PartitionId]:[BrokerId],[PartitionId]:[BrokerId]:... or the wildcard '*' to throttle all replicas of this topic; the bound is the leader.replication.throttled.rate broker config."
    ),
    def!(
        "max.compaction.lag.ms",
        Long,
        Some("log.cleaner.max.compaction.lag.ms"),
        Some(1.0),
        None,
        &[],
        |_| LONG_MAX.into(),
        "Maximum time a message stays ineligible for compaction."
    ),
    def!(
        "max.message.bytes",
        Int,
        Some("message.max.bytes"),
        Some(0.0),
        None,
        &[],
        |b| b.message_max_bytes.to_string(),
        "Largest record batch size allowed."
    ),
    def!(
        "message.timestamp.after.max.ms",
        Long,
        Some("log.message.timestamp.after.max.ms"),
        Some(0.0),
        None,
        &[],
        |_| "3600000".into(),
        "Allowed distance of a record timestamp ahead of the broker clock."
    ),
    def!(
        "message.timestamp.before.max.ms",
        Long,
        Some("log.message.timestamp.before.max.ms"),
        Some(0.0),
        None,
        &[],
        |_| LONG_MAX.into(),
        "Allowed distance of a record timestamp behind the broker clock."
    ),
    def!(
        "message.timestamp.type",
        String,
        Some("log.message.timestamp.type"),
        None,
        None,
        &["CreateTime", "LogAppendTime"],
        |_| "CreateTime".into(),
        "Whether record timestamps are the producer's create time or the log append time."
    ),
    def!(
        "min.cleanable.dirty.ratio",
        Double,
        Some("log.cleaner.min.cleanable.ratio"),
        Some(0.0),
        Some(1.0),
        &[],
        |_| "0.5".into(),
        "Dirty ratio above which the log is eligible for cleaning."
    ),
    def!(
        "min.compaction.lag.ms",
        Long,
        Some("log.cleaner.min.compaction.lag.ms"),
        Some(0.0),
        None,
        &[],
        |_| "0".into(),
        "Minimum time a message stays uncompacted."
    ),
    def!(
        "min.insync.replicas",
        Int,
        Some("min.insync.replicas"),
        Some(1.0),
        None,
        &[],
        |b| b.min_insync_replicas.to_string(),
        "Minimum in-sync replicas for acks=all writes."
    ),
    def!(
        "preallocate",
        Boolean,
        Some("log.preallocate"),
        None,
        None,
        &[],
        |_| "false".into(),
        "Preallocate segment files."
    ),
    def!(
        "retention.bytes",
        Long,
        Some("log.retention.bytes"),
        Some(-1.0),
        None,
        &[],
        |b| b.log_retention_bytes.to_string(),
        "Maximum partition size before old segments are deleted."
    ),
    def!(
        "retention.ms",
        Long,
        None,
        Some(-1.0),
        None,
        &[],
        |b| b.log_retention_ms.to_string(),
        "Maximum age of a segment before it is deleted."
    ),
    def!(
        "segment.bytes",
        Int,
        Some("log.segment.bytes"),
        Some(14.0),
        None,
        &[],
        |b| b.log_segment_bytes.min(i32::MAX as u64).to_string(),
        "Segment file size."
    ),
    def!(
        "segment.index.bytes",
        Int,
        Some("log.index.size.max.bytes"),
        Some(4.0),
        None,
        &[],
        |_| "10485760".into(),
        "Offset index size."
    ),
    def!(
        "segment.jitter.ms",
        Long,
        None,
        Some(0.0),
        None,
        &[],
        |_| "0".into(),
        "Random jitter subtracted from segment.ms."
    ),
    def!(
        "segment.ms",
        Long,
        None,
        Some(1.0),
        None,
        &[],
        |b| b.log_segment_ms.to_string(),
        "Time after which a segment is rolled."
    ),
    def!(
        "unclean.leader.election.enable",
        Boolean,
        Some("unclean.leader.election.enable"),
        None,
        None,
        &[],
        |_| "false".into(),
        "Allow out-of-sync replicas to become leader."
    ),
];

pub fn find(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// The topic config whose broker-wide default is broker config `name` (Kafka's
/// `ServerTopicConfigSynonyms`, first synonym): `log.retention.ms` for `retention.ms`.
pub fn by_server_default(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.server_default() == Some(name))
}

impl TopicConfigDef {
    pub fn default_value(&self, broker: &BrokerConfig) -> String {
        (self.default)(broker)
    }

    /// The broker config that sets this topic config's default for every topic without
    /// an override, and that can change at runtime as a dynamic broker config (Kafka's
    /// first synonym in `ServerTopicConfigSynonyms`). Four of them are not in
    /// `broker_synonym`, since Kafka's static default for them is an hour-based config,
    /// so they are named here. The throttled-replica lists have none.
    pub fn server_default(&self) -> Option<&'static str> {
        self.broker_synonym.or(match self.name {
            "flush.ms" => Some("log.flush.interval.ms"),
            "retention.ms" => Some("log.retention.ms"),
            "segment.jitter.ms" => Some("log.roll.jitter.ms"),
            "segment.ms" => Some("log.roll.ms"),
            _ => None,
        })
    }

    /// Check a value; the error text follows Kafka's ConfigException wording.
    pub fn validate(&self, value: &str) -> Result<(), String> {
        self.validate_as(self.name, value)
    }

    /// The same check, its words naming config `shown` (a broker config that sets this
    /// one's default).
    pub fn validate_as(&self, shown: &str, value: &str) -> Result<(), String> {
        let bad = |why: String| Err(format!("Invalid value {value} for configuration {shown}: {why}"));
        let number = match self.ty {
            ConfigType::Boolean => {
                if !value.eq_ignore_ascii_case("true") && !value.eq_ignore_ascii_case("false") {
                    return bad("Expected value to be either true or false".into());
                }
                None
            }
            ConfigType::Int | ConfigType::Short | ConfigType::Long => {
                let parsed = match self.ty {
                    ConfigType::Int => value.trim().parse::<i32>().map(f64::from).ok(),
                    ConfigType::Short => value.trim().parse::<i16>().map(f64::from).ok(),
                    _ => value.trim().parse::<i64>().map(|v| v as f64).ok(),
                };
                match parsed {
                    Some(v) => Some(v),
                    None => return bad(format!("Not a number of type {}", self.ty.name())),
                }
            }
            ConfigType::Double => match value.trim().parse::<f64>() {
                Ok(v) if v.is_finite() => Some(v),
                _ => return bad("Not a number of type DOUBLE".into()),
            },
            ConfigType::String | ConfigType::Class => {
                if !self.choices.is_empty() && !self.choices.contains(&value) {
                    return bad(format!("String must be one of: {}", self.choices.join(", ")));
                }
                None
            }
            ConfigType::List if self.name.ends_with(".replication.throttled.replicas") => {
                // Kafka's ThrottledReplicaListValidator.
                let pair = |item: &str| {
                    item.is_empty()
                        || item.split_once(':').is_some_and(|(p, b)| {
                            [p, b].iter().all(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
                        })
                };
                if value.trim() != "*" && !value.split(',').map(str::trim).all(pair) {
                    return bad(format!(
                        "{} must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...",
                        self.name
                    ));
                }
                None
            }
            ConfigType::List => {
                for item in value.split(',').map(str::trim) {
                    if !self.choices.is_empty() && !self.choices.contains(&item) {
                        return bad(format!("List items must be one of: {}", self.choices.join(", ")));
                    }
                }
                None
            }
        };
        if let Some(v) = number {
            if let Some(min) = self.min {
                if v < min {
                    return bad(format!("Value must be at least {min}"));
                }
            }
            if let Some(max) = self.max {
                if v > max {
                    return bad(format!("Value must be no more than {max}"));
                }
            }
        }
        Ok(())
    }
}

/// Validate a named config; unknown names are refused as Kafka does.
pub fn validate(name: &str, value: &str) -> Result<(), String> {
    match find(name) {
        Some(def) => def.validate(value),
        None => Err(format!("Unknown topic config name: {name}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_like_kafka() {
        assert!(validate("retention.ms", "1000").is_ok());
        assert!(validate("retention.ms", "-1").is_ok());
        assert!(validate("retention.ms", "-2").is_err());
        assert!(validate("retention.ms", "abc").unwrap_err().contains("LONG"));
        assert!(validate("segment.bytes", "99999999999").is_err());
        assert!(validate("cleanup.policy", "compact,delete").is_ok());
        assert!(validate("cleanup.policy", "shred").is_err());
        assert!(validate("message.timestamp.type", "LogAppendTime").is_ok());
        assert!(validate("preallocate", "maybe").is_err());
        assert!(validate("min.cleanable.dirty.ratio", "1.5").is_err());
        assert!(validate("no.such.config", "1").unwrap_err().contains("Unknown"));
        for ok in ["*", "0:1,1:2", " 0:1 , 3:4", ""] {
            assert!(validate("leader.replication.throttled.replicas", ok).is_ok(), "{ok}");
        }
        for bad in ["0", "a:1", "0:1,*", "-1:2", "0:1:2"] {
            assert!(validate("follower.replication.throttled.replicas", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn table_is_sorted_and_defaults_are_valid() {
        let broker = BrokerConfig::default();
        for w in TOPIC_CONFIGS.windows(2) {
            assert!(w[0].name < w[1].name, "{} before {}", w[0].name, w[1].name);
        }
        for d in TOPIC_CONFIGS {
            d.validate(&d.default_value(&broker)).unwrap_or_else(|e| panic!("{}: {e}", d.name));
        }
    }
}
