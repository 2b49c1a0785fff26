//! Dynamic broker configs: the broker settings an operator changes while the cluster runs
//! (`kafka-configs --entity-type brokers`, `kafka-reassign-partitions --throttle`), kept
//! in the metadata log like a topic's configs. Two levels, as in Kafka: one broker's
//! (resource name = its node id) over the cluster-wide default (resource name "") over
//! the static default.
//!
//! Two kinds of config can change this way, as in Kafka: the rates below, and the
//! broker-wide defaults of topic configs (`log.retention.ms` for every topic without its
//! own `retention.ms`; Kafka's `DynamicLogConfig`), typed and checked by the topic
//! config table. The rest of a broker's settings come from its config file, and a
//! request to change one is refused with Kafka's words.

use std::collections::BTreeMap;

use super::eligible_leaders;
use super::image::MetadataImage;
use super::operations::ConfigChange;
use super::records::MetadataRecord;
use super::topic_config::{self, TOPIC_CONFIGS};
use super::ControllerError;

/// Bytes per second a leader sends to throttled replicas, summed over its partitions.
pub const LEADER_REPLICATION_THROTTLED_RATE: &str = "leader.replication.throttled.rate";
/// Bytes per second a follower fetches for throttled replicas.
pub const FOLLOWER_REPLICATION_THROTTLED_RATE: &str = "follower.replication.throttled.rate";

/// Bytes per second a broker copies moving partitions between its log directories.
pub const REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND: &str = "replica.alter.log.dirs.io.max.bytes.per.second";

/// Kafka's default for the rates, `Long.MAX_VALUE`: no throttle.
pub const UNLIMITED_RATE: i64 = i64::MAX;

/// A config that can change at runtime: its name and documentation (all are LONG ≥ 0
/// with an unlimited default).
pub struct DynamicBrokerConfigDef {
    pub name: &'static str,
    pub doc: &'static str,
}

pub const DYNAMIC_BROKER_CONFIGS: [DynamicBrokerConfigDef; 3] = [
    DynamicBrokerConfigDef {
        name: LEADER_REPLICATION_THROTTLED_RATE,
        doc: "A long representing the upper bound (bytes/sec) on replication traffic for leaders enumerated in the property leader.replication.throttled.replicas (for each topic).",
    },
    DynamicBrokerConfigDef {
        name: FOLLOWER_REPLICATION_THROTTLED_RATE,
        doc: "A long representing the upper bound (bytes/sec) on replication traffic for followers enumerated in the property follower.replication.throttled.replicas (for each topic).",
    },
    DynamicBrokerConfigDef {
        name: REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND,
        doc: "A long representing the upper bound (bytes/sec) on disk IO used for moving replicas between log directories on the same broker.",
    },
];

/// Where a broker config's value comes from, most specific first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DynamicSource {
    /// Set for this broker.
    Broker,
    /// Set as the cluster-wide default.
    ClusterDefault,
    /// Not set dynamically.
    Default,
}

pub fn find(name: &str) -> Option<&'static DynamicBrokerConfigDef> {
    DYNAMIC_BROKER_CONFIGS.iter().find(|d| d.name == name)
}

/// The resource name of one broker's configs.
pub fn resource_of(node_id: i32) -> String {
    node_id.to_string()
}

/// The values of config `name` set for broker `node_id` (`None`: only the cluster
/// default's), most specific first: what DescribeConfigs lists as synonyms.
pub fn set_values<'a>(image: &'a MetadataImage, node_id: Option<i32>, name: &str) -> Vec<(DynamicSource, &'a String)> {
    let set = |resource: &str| image.broker_configs.get(resource).and_then(|c| c.get(name));
    let own = node_id.and_then(|id| set(&resource_of(id))).map(|v| (DynamicSource::Broker, v));
    own.into_iter().chain(set("").map(|v| (DynamicSource::ClusterDefault, v))).collect()
}

/// A dynamic config's value on broker `node_id` and where it comes from.
pub fn effective(image: &MetadataImage, node_id: i32, name: &str) -> (i64, DynamicSource) {
    set_values(image, Some(node_id), name)
        .into_iter()
        .find_map(|(source, v)| Some((parse(v)?, source)))
        .unwrap_or((UNLIMITED_RATE, DynamicSource::Default))
}

fn parse(value: &str) -> Option<i64> {
    value.trim().parse::<i64>().ok().filter(|v| *v >= 0)
}

/// Topic config name → the value its broker-wide default has on broker `node_id`, for
/// each default set dynamically (for that broker, else for the cluster). What a topic
/// without its own value of that config gets instead of the static default.
pub type TopicDefaults = BTreeMap<&'static str, String>;

pub fn topic_defaults(image: &MetadataImage, node_id: i32) -> TopicDefaults {
    if image.broker_configs.is_empty() {
        return TopicDefaults::new();
    }
    TOPIC_CONFIGS
        .iter()
        .filter_map(|def| {
            let (_, value) = set_values(image, Some(node_id), def.server_default()?).into_iter().next()?;
            Some((def.name, value.clone()))
        })
        .collect()
}

/// Whether a change to broker config `name` changes the settings of topics (so every
/// topic's typed settings are worked out again).
pub fn is_topic_default(name: &str) -> bool {
    topic_config::by_server_default(name).is_some()
}

/// Kafka's check of one value: a rate is a LONG, at least 0; a topic config's default is
/// checked as that topic config is. Kafka's broker refuses any bad dynamic broker config
/// with INVALID_REQUEST.
fn validate(name: &str, value: &str) -> Result<(), ControllerError> {
    if let Some(def) = topic_config::by_server_default(name) {
        return def.validate_as(name, value).map_err(ControllerError::InvalidRequest);
    }
    if find(name).is_none() {
        return Err(ControllerError::InvalidRequest(format!(
            "Cannot update these configs dynamically: Set({name}); runnel updates only {} and the broker-wide \
             defaults of topic configs (log.retention.ms, ...) at runtime",
            DYNAMIC_BROKER_CONFIGS.iter().map(|d| d.name).collect::<Vec<_>>().join(", ")
        )));
    }
    let bad =
        |why: &str| ControllerError::InvalidRequest(format!("Invalid value {value} for configuration {name}: {why}"));
    let v: i64 = value.trim().parse().map_err(|_| bad("Not a number of type LONG"))?;
    if v < 0 {
        return Err(bad("Value must be at least 0"));
    }
    Ok(())
}

/// The records that apply `changes` to broker resource `resource` ("" for the cluster
/// default, else a node id), all or none. Deleting a config that is not set writes
/// nothing, as it changes nothing.
pub fn alter(
    image: &MetadataImage,
    resource: &str,
    changes: &[ConfigChange],
) -> Result<Vec<MetadataRecord>, ControllerError> {
    if !resource.is_empty() && resource.parse::<i32>().map_or(true, |id| id < 0) {
        return Err(ControllerError::InvalidRequest(format!("Invalid broker id {resource}")));
    }
    let mut result: BTreeMap<String, String> = image.broker_configs.get(resource).cloned().unwrap_or_default();
    let mut records = Vec::new();
    for change in changes {
        let (name, value) = match change {
            ConfigChange::Set(k, v) => {
                validate(k, v)?;
                // Kafka's rule with ELR on: `min.insync.replicas` is set per topic or for
                // the cluster. (Deleting one is let through: it can only bring a broker to
                // the cluster's value, and a data dir from before may hold some.)
                if k == eligible_leaders::MIN_ISR && !resource.is_empty() && eligible_leaders::enabled(image) {
                    return Err(ControllerError::InvalidConfig(
                        "Broker-level min.insync.replicas cannot be altered while ELR is enabled.".into(),
                    ));
                }
                result.insert(k.clone(), v.trim().to_owned());
                (k, Some(v.trim().to_owned()))
            }
            ConfigChange::Delete(k) => {
                if result.remove(k).is_none() {
                    continue;
                }
                (k, None)
            }
        };
        records.push(MetadataRecord::BrokerConfig { resource: resource.to_owned(), name: name.clone(), value });
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(image: &mut MetadataImage, resource: &str, changes: &[ConfigChange]) {
        for r in alter(image, resource, changes).unwrap() {
            image.apply(&r);
        }
    }

    #[test]
    fn a_brokers_own_value_wins_over_the_cluster_default_which_wins_over_unlimited() {
        let mut image = MetadataImage::default();
        let rate = LEADER_REPLICATION_THROTTLED_RATE;
        assert_eq!(effective(&image, 1, rate), (UNLIMITED_RATE, DynamicSource::Default));
        apply(&mut image, "", &[ConfigChange::Set(rate.into(), "5000".into())]);
        assert_eq!(effective(&image, 1, rate), (5000, DynamicSource::ClusterDefault));
        apply(&mut image, "1", &[ConfigChange::Set(rate.into(), " 100 ".into())]);
        assert_eq!(effective(&image, 1, rate), (100, DynamicSource::Broker));
        assert_eq!(effective(&image, 2, rate), (5000, DynamicSource::ClusterDefault));
        assert_eq!(effective(&image, 1, FOLLOWER_REPLICATION_THROTTLED_RATE).1, DynamicSource::Default);
        apply(&mut image, "1", &[ConfigChange::Delete(rate.into())]);
        assert_eq!(effective(&image, 1, rate), (5000, DynamicSource::ClusterDefault));
        // The snapshot carries them.
        let again = MetadataImage::from_records(&image.to_records(), image.offset);
        assert_eq!(again.broker_configs, image.broker_configs);
    }

    #[test]
    fn a_topic_configs_broker_wide_default_is_checked_as_that_config_and_named_by_topic_config() {
        let mut image = MetadataImage::default();
        let set = |k: &str, v: &str| vec![ConfigChange::Set(k.into(), v.into())];
        for (name, bad, why) in [
            ("log.retention.ms", "abc", "LONG"),
            ("log.cleanup.policy", "shred", "must be one of"),
            ("min.insync.replicas", "0", "at least 1"),
            ("log.roll.ms", "0", "at least 1"),
        ] {
            match alter(&image, "", &set(name, bad)) {
                Err(ControllerError::InvalidRequest(m)) => {
                    assert!(m.contains(name) && m.contains(why), "{name}={bad}: {m}")
                }
                other => panic!("{name}={bad}: {other:?}"),
            }
        }
        assert_eq!(topic_defaults(&image, 1), TopicDefaults::new());
        apply(&mut image, "", &set("log.retention.ms", "1000"));
        apply(&mut image, "", &set("log.cleanup.policy", "compact,delete"));
        apply(&mut image, "1", &set("log.retention.ms", " 50 "));
        apply(&mut image, "1", &set(LEADER_REPLICATION_THROTTLED_RATE, "7"));
        let on = |node| topic_defaults(&image, node);
        assert_eq!(
            on(1),
            TopicDefaults::from([("cleanup.policy", "compact,delete".to_owned()), ("retention.ms", "50".into())])
        );
        assert_eq!(on(2)["retention.ms"], "1000");
        assert!(is_topic_default("message.max.bytes") && is_topic_default("log.roll.ms"));
        assert!(!is_topic_default(LEADER_REPLICATION_THROTTLED_RATE) && !is_topic_default("log.retention.hours"));
    }

    #[test]
    fn refused_changes_write_nothing_and_say_why_in_kafkas_terms() {
        let image = MetadataImage::default();
        let set = |k: &str, v: &str| vec![ConfigChange::Set(k.into(), v.into())];
        let rate = FOLLOWER_REPLICATION_THROTTLED_RATE;
        assert!(matches!(alter(&image, "1", &set("broker.id", "7")), Err(ControllerError::InvalidRequest(_))));
        assert!(
            matches!(alter(&image, "1", &set(rate, "abc")), Err(ControllerError::InvalidRequest(m)) if m.contains("LONG"))
        );
        assert!(
            matches!(alter(&image, "1", &set(rate, "-5")), Err(ControllerError::InvalidRequest(m)) if m.contains("at least 0"))
        );
        assert!(matches!(alter(&image, "x", &set(rate, "5")), Err(ControllerError::InvalidRequest(_))));
        // One bad change refuses them all.
        let mixed = vec![ConfigChange::Set(rate.into(), "5".into()), ConfigChange::Set("log.dirs".into(), "/x".into())];
        assert!(alter(&image, "1", &mixed).is_err());
        // With ELR on (the default), min.insync.replicas is the cluster's or a topic's.
        let min_isr = set("min.insync.replicas", "2");
        assert!(matches!(alter(&image, "1", &min_isr), Err(ControllerError::InvalidConfig(m)) if m.contains("ELR")));
        assert!(alter(&image, "", &min_isr).is_ok());
        let mut off = MetadataImage::default();
        off.apply(&MetadataRecord::FeatureLevel { name: "eligible.leader.replicas.version".into(), level: 0 });
        assert!(alter(&off, "1", &min_isr).is_ok());
        // Deleting what is not set changes nothing (`kafka-reassign-partitions --verify`
        // clears throttles that may never have been set).
        assert_eq!(alter(&image, "1", &[ConfigChange::Delete(rate.into())]).unwrap(), vec![]);
    }
}
