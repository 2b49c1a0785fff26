//! What one commit changed, so subscribers act on the topics and partitions it touched
//! instead of diffing the whole image (Kafka's `MetadataDelta`), and how a new image
//! reaches them: [`MetadataListener`], called once per commit, in commit order.

use std::collections::BTreeSet;
use std::sync::Arc;

use uuid::Uuid;

use super::broker_config;
use super::image::{MetadataImage, TopicImage};
use super::records::MetadataRecord;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataDelta {
    /// Topics created, reconfigured or given partitions.
    pub changed_topics: BTreeSet<Uuid>,
    /// Partitions created or whose replicas, ISR or leader changed.
    pub changed_partitions: BTreeSet<(Uuid, i32)>,
    /// Topics deleted.
    pub removed_topics: BTreeSet<Uuid>,
    /// A broker-wide default of topic configs (`log.retention.ms`, ...) changed, which
    /// may change the settings of every topic.
    pub topic_defaults_changed: bool,
}

impl MetadataDelta {
    pub fn of(records: &[MetadataRecord]) -> MetadataDelta {
        let mut d = MetadataDelta::default();
        for r in records {
            match r {
                MetadataRecord::Topic { topic_id, .. } | MetadataRecord::TopicConfig { topic_id, .. } => {
                    d.changed_topics.insert(*topic_id);
                }
                MetadataRecord::Partition { topic_id, partition, .. } => {
                    d.changed_topics.insert(*topic_id);
                    d.changed_partitions.insert((*topic_id, *partition));
                }
                MetadataRecord::RemoveTopic { topic_id } => {
                    d.removed_topics.insert(*topic_id);
                }
                MetadataRecord::Cluster { .. }
                | MetadataRecord::RegisterBroker { .. }
                | MetadataRecord::BrokerFenced { .. }
                | MetadataRecord::BrokerControlledShutdown { .. }
                | MetadataRecord::UnregisterBroker { .. }
                | MetadataRecord::ProducerIds { .. }
                | MetadataRecord::ClientMetricsConfig { .. }
                | MetadataRecord::FeatureLevel { .. } => {}
                MetadataRecord::BrokerConfig { name, .. } => {
                    d.topic_defaults_changed |= broker_config::is_topic_default(name);
                }
            }
        }
        d
    }

    /// The topics of `image` whose settings or partitions may have changed: those
    /// `changed_topics` names, or all of them after a change to a broker-wide default.
    pub fn reconfigured_topics<'a>(&'a self, image: &'a MetadataImage) -> Vec<&'a Arc<TopicImage>> {
        if self.topic_defaults_changed {
            image.topics.values().collect()
        } else {
            self.changed_topics.iter().filter_map(|id| image.topic_by_id(id)).collect()
        }
    }

    /// Everything in `image`, as if it had just been created (a subscriber's first view).
    pub fn everything(image: &MetadataImage) -> MetadataDelta {
        let mut d = MetadataDelta::default();
        for t in image.topics.values() {
            d.changed_topics.insert(t.topic_id);
            d.changed_partitions.extend(t.partitions.iter().map(|p| (t.topic_id, p.partition)));
        }
        d
    }
}

/// A subscriber to committed metadata. Called under the controller's commit order (never
/// concurrently with itself, never out of order); it must not call back into the
/// controller.
pub trait MetadataListener: Send + Sync {
    /// Before a commit is written: the image and delta it would make. A listener that
    /// could not act on them (e.g. cannot open a new partition's files) refuses, and
    /// nothing is committed, so no change is half applied. What it readies here is used
    /// by the `on_commit` that follows, or dropped by `discard`.
    fn prepare(&self, _image: &MetadataImage, _delta: &MetadataDelta) -> Result<(), String> {
        Ok(())
    }

    /// The prepared commit was not written after all.
    fn discard(&self) {}

    fn on_commit(&self, image: &Arc<MetadataImage>, delta: &MetadataDelta);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delta_names_what_its_records_touch() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let records = vec![
            MetadataRecord::Topic { name: "a".into(), topic_id: a },
            MetadataRecord::Partition {
                topic_id: a,
                partition: 0,
                replicas: vec![1],
                isr: vec![1],
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                adding_replicas: vec![],
                removing_replicas: vec![],
                eligible_leader_replicas: Vec::new(),
                last_known_elr: Vec::new(),
            },
            MetadataRecord::RemoveTopic { topic_id: b },
            MetadataRecord::ProducerIds { next_producer_id: 1000 },
        ];
        let d = MetadataDelta::of(&records);
        assert_eq!(d.changed_topics, BTreeSet::from([a]));
        assert_eq!(d.changed_partitions, BTreeSet::from([(a, 0)]));
        assert_eq!(d.removed_topics, BTreeSet::from([b]));
        assert!(!d.topic_defaults_changed);
    }

    #[test]
    fn a_broker_wide_topic_default_reconfigures_every_topic_and_a_rate_none() {
        let mut image = MetadataImage::default();
        for (i, name) in ["a", "b"].iter().enumerate() {
            image.apply(&MetadataRecord::Topic { name: (*name).into(), topic_id: Uuid::from_u128(i as u128 + 1) });
        }
        let set = |name: &str| MetadataRecord::BrokerConfig { resource: String::new(), name: name.into(), value: None };
        let d = MetadataDelta::of(&[set("log.retention.ms")]);
        assert!(d.topic_defaults_changed && d.changed_topics.is_empty());
        assert_eq!(d.reconfigured_topics(&image).len(), 2);
        let d = MetadataDelta::of(&[set("leader.replication.throttled.rate")]);
        assert!(!d.topic_defaults_changed && d.reconfigured_topics(&image).is_empty());
    }
}
