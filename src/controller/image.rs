//! The metadata image: cluster metadata at one point of the metadata log.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use uuid::Uuid;

use super::records::{Endpoint, MetadataRecord};
use super::ControllerError;

#[derive(Debug, Clone, PartialEq)]
pub struct BrokerImage {
    pub node_id: i32,
    /// The client listener's advertised address.
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
    /// Out of the cluster until its heartbeats let it back in (Kafka's fenced broker).
    pub fenced: bool,
    /// The inter-broker listener's advertised address, if the broker has one.
    pub inter_broker: Option<Endpoint>,
    /// The broker process the controller last registered (its incarnation id), if any
    /// record named one.
    pub incarnation: Option<Uuid>,
    /// The newest metadata record format its registered process reads
    /// ([`METADATA_FORMAT`](super::records::METADATA_FORMAT)).
    pub metadata_format: u16,
}

/// Which of a broker's listeners a connection came in on, or an address is wanted for
/// (Kafka's listener names: the client listener, and the one named by
/// `inter.broker.listener.name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Listener {
    #[default]
    Client,
    InterBroker,
}

impl BrokerImage {
    /// Where to reach this broker on `listener`: its inter-broker address when that is
    /// asked for and the broker registered one, else its client address (a broker
    /// without a second listener serves brokers on its only one).
    pub fn endpoint(&self, listener: Listener) -> (&str, u16) {
        match (&self.inter_broker, listener) {
            (Some(e), Listener::InterBroker) => (&e.host, e.port),
            _ => (&self.host, self.port),
        }
    }

    /// The registration record that sets this broker's address, rack and process as
    /// they are (its fencing has records of its own).
    pub fn to_record(&self) -> MetadataRecord {
        MetadataRecord::RegisterBroker {
            node_id: self.node_id,
            host: self.host.clone(),
            port: self.port,
            rack: self.rack.clone(),
            inter_broker: self.inter_broker.clone(),
            incarnation: self.incarnation,
            metadata_format: self.metadata_format,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct PartitionImage {
    pub partition: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// A reassignment in progress: see [`MetadataRecord::Partition`].
    pub adding_replicas: Vec<i32>,
    pub removing_replicas: Vec<i32>,
    /// Eligible leader replicas and the last known leader (KIP-966): see
    /// [`MetadataRecord::Partition`].
    pub elr: Vec<i32>,
    pub last_known_elr: Vec<i32>,
}

impl PartitionImage {
    /// The record that sets this partition as it is.
    pub fn to_record(&self, topic_id: Uuid) -> MetadataRecord {
        MetadataRecord::Partition {
            topic_id,
            partition: self.partition,
            replicas: self.replicas.clone(),
            isr: self.isr.clone(),
            leader: self.leader,
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            adding_replicas: self.adding_replicas.clone(),
            removing_replicas: self.removing_replicas.clone(),
            eligible_leader_replicas: self.elr.clone(),
            last_known_elr: self.last_known_elr.clone(),
        }
    }

    /// A reassignment is in progress.
    pub fn is_reassigning(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TopicImage {
    pub name: String,
    pub topic_id: Uuid,
    /// Indexed by partition number: partitions are numbered 0..n without gaps.
    pub partitions: Vec<PartitionImage>,
    /// Topic-level overrides only; broker defaults fill in the rest.
    pub configs: BTreeMap<String, String>,
}

impl TopicImage {
    pub fn is_internal(&self) -> bool {
        self.name.starts_with("__")
    }

    /// Partition `index`, if the topic has it (a negative index, as read from the wire,
    /// has none).
    pub fn partition(&self, index: i32) -> Option<&PartitionImage> {
        usize::try_from(index).ok().and_then(|i| self.partitions.get(i))
    }
}

/// Immutable; a change produces a new image (cheap: topics are behind `Arc`).
#[derive(Debug, Clone, Default)]
pub struct MetadataImage {
    pub cluster_id: String,
    pub brokers: BTreeMap<i32, BrokerImage>,
    pub topics: BTreeMap<String, Arc<TopicImage>>,
    pub topic_names_by_id: HashMap<Uuid, String>,
    pub next_producer_id: i64,
    /// KIP-714 client-metrics subscriptions: name → configs (never empty).
    pub client_metrics: BTreeMap<String, BTreeMap<String, String>>,
    /// Dynamic broker configs (`broker_config.rs`): resource (a node id, or "" for the
    /// cluster default) → configs (never empty).
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Brokers in controlled shutdown (KIP-841): still serving while their leadership
    /// moves off, but elected nowhere and kept out of ISRs. Cleared when the broker is
    /// fenced or let back in.
    pub controlled_shutdown: BTreeSet<i32>,
    /// Finalized feature levels that records set (`features.rs`; a feature no record
    /// names is at the highest level this build supports).
    pub features: BTreeMap<String, i16>,
    /// Number of records applied: the metadata offset this image reflects.
    pub offset: u64,
}

/// Sets (`Some`) or removes (`None`) config `name` of `resource`; a resource left with no
/// configs is gone.
fn set_config(
    resources: &mut BTreeMap<String, BTreeMap<String, String>>,
    resource: &str,
    name: &str,
    value: Option<&String>,
) {
    let configs = resources.entry(resource.to_owned()).or_default();
    match value {
        Some(v) => configs.insert(name.to_owned(), v.clone()),
        None => configs.remove(name),
    };
    if configs.is_empty() {
        resources.remove(resource);
    }
}

impl MetadataImage {
    pub fn topic(&self, name: &str) -> Option<&Arc<TopicImage>> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, id: &Uuid) -> Option<&Arc<TopicImage>> {
        self.topic_names_by_id.get(id).and_then(|n| self.topics.get(n))
    }

    /// Apply one record. Records that refer to unknown topics are ignored: they cannot be
    /// produced by the controller, and a log must replay even if hand-edited.
    pub fn apply(&mut self, record: &MetadataRecord) {
        self.offset += 1;
        match record {
            MetadataRecord::Cluster { cluster_id } => self.cluster_id = cluster_id.clone(),
            MetadataRecord::RegisterBroker {
                node_id,
                host,
                port,
                rack,
                inter_broker,
                incarnation,
                metadata_format,
            } => {
                let known = self.brokers.get(node_id);
                let broker = BrokerImage {
                    node_id: *node_id,
                    host: host.clone(),
                    port: *port,
                    rack: rack.clone(),
                    fenced: known.is_some_and(|b| b.fenced),
                    inter_broker: inter_broker.clone(),
                    incarnation: incarnation.or(known.and_then(|b| b.incarnation)),
                    metadata_format: *metadata_format,
                };
                self.brokers.insert(*node_id, broker);
            }
            MetadataRecord::Topic { name, topic_id } => {
                self.topic_names_by_id.insert(*topic_id, name.clone());
                self.topics.insert(
                    name.clone(),
                    Arc::new(TopicImage {
                        name: name.clone(),
                        topic_id: *topic_id,
                        partitions: Vec::new(),
                        configs: BTreeMap::new(),
                    }),
                );
            }
            MetadataRecord::Partition {
                topic_id,
                partition,
                replicas,
                isr,
                leader,
                leader_epoch,
                partition_epoch,
                adding_replicas,
                removing_replicas,
                eligible_leader_replicas,
                last_known_elr,
            } => {
                if let Some(topic) = self.topic_mut(topic_id) {
                    let p = PartitionImage {
                        partition: *partition,
                        replicas: replicas.clone(),
                        isr: isr.clone(),
                        leader: *leader,
                        leader_epoch: *leader_epoch,
                        partition_epoch: *partition_epoch,
                        adding_replicas: adding_replicas.clone(),
                        removing_replicas: removing_replicas.clone(),
                        elr: eligible_leader_replicas.clone(),
                        last_known_elr: last_known_elr.clone(),
                    };
                    let idx = *partition as usize;
                    if idx < topic.partitions.len() {
                        topic.partitions[idx] = p;
                    } else if idx == topic.partitions.len() {
                        topic.partitions.push(p);
                    }
                }
            }
            MetadataRecord::TopicConfig { topic_id, name, value } => {
                if let Some(topic) = self.topic_mut(topic_id) {
                    match value {
                        Some(v) => topic.configs.insert(name.clone(), v.clone()),
                        None => topic.configs.remove(name),
                    };
                }
            }
            MetadataRecord::RemoveTopic { topic_id } => {
                if let Some(name) = self.topic_names_by_id.remove(topic_id) {
                    self.topics.remove(&name);
                }
            }
            MetadataRecord::ClientMetricsConfig { subscription, name, value } => {
                set_config(&mut self.client_metrics, subscription, name, value.as_ref());
            }
            MetadataRecord::BrokerConfig { resource, name, value } => {
                set_config(&mut self.broker_configs, resource, name, value.as_ref());
            }
            MetadataRecord::ProducerIds { next_producer_id } => {
                self.next_producer_id = self.next_producer_id.max(*next_producer_id);
            }
            MetadataRecord::BrokerFenced { node_id, fenced } => {
                if let Some(b) = self.brokers.get_mut(node_id) {
                    b.fenced = *fenced;
                }
                self.controlled_shutdown.remove(node_id);
            }
            MetadataRecord::BrokerControlledShutdown { node_id } => {
                if self.brokers.contains_key(node_id) {
                    self.controlled_shutdown.insert(*node_id);
                }
            }
            MetadataRecord::UnregisterBroker { node_id } => {
                self.brokers.remove(node_id);
                self.controlled_shutdown.remove(node_id);
            }
            MetadataRecord::FeatureLevel { name, level } => {
                self.features.insert(name.clone(), *level);
            }
        }
    }

    /// The broker asked to shut down and has not been fenced or let back in since.
    pub fn in_controlled_shutdown(&self, node_id: i32) -> bool {
        self.controlled_shutdown.contains(&node_id)
    }

    /// Alive and not in controlled shutdown: a broker leadership can move to, and that an
    /// ISR it shares counts on.
    pub fn broker_staying(&self, node_id: i32) -> bool {
        self.broker_alive(node_id) && !self.in_controlled_shutdown(node_id)
    }

    /// The registered brokers whose process does not read records of format `level`
    /// (fenced ones too: they read the log when they come back).
    pub fn brokers_behind(&self, level: u16) -> Vec<i32> {
        self.brokers.values().filter(|b| b.metadata_format < level).map(|b| b.node_id).collect()
    }

    /// Every broker still registered once `records` apply reads them, or
    /// UNSUPPORTED_VERSION naming those that would not (their metadata log would stop at
    /// the first record they cannot read). A broker the records unregister is not asked:
    /// it is leaving, and registers anew (on a release that reads the log) if it returns.
    pub fn check_readable(&self, records: &[MetadataRecord]) -> Result<(), ControllerError> {
        let Some(level) = records.iter().map(MetadataRecord::format_level).max().filter(|l| *l > 0) else {
            return Ok(());
        };
        let leaving: Vec<i32> = records
            .iter()
            .filter_map(|r| match r {
                MetadataRecord::UnregisterBroker { node_id } => Some(*node_id),
                _ => None,
            })
            .collect();
        let behind: Vec<i32> = self.brokers_behind(level).into_iter().filter(|b| !leaving.contains(b)).collect();
        if behind.is_empty() {
            return Ok(());
        }
        Err(ControllerError::UnsupportedVersion(format!(
            "brokers {behind:?} run a release that cannot read the metadata records of this change \
             (record format {level}): upgrade them first"
        )))
    }

    /// Registered and not fenced.
    pub fn broker_alive(&self, node_id: i32) -> bool {
        self.brokers.get(&node_id).is_some_and(|b| !b.fenced)
    }

    /// The records that rebuild this image when applied to an empty one (a snapshot of
    /// the metadata log). `offset` is not among them; a snapshot stores it beside.
    pub fn to_records(&self) -> Vec<MetadataRecord> {
        let mut out = Vec::new();
        if !self.cluster_id.is_empty() {
            out.push(MetadataRecord::Cluster { cluster_id: self.cluster_id.clone() });
        }
        for b in self.brokers.values() {
            out.push(b.to_record());
            if b.fenced {
                out.push(MetadataRecord::BrokerFenced { node_id: b.node_id, fenced: true });
            }
            if self.in_controlled_shutdown(b.node_id) {
                out.push(MetadataRecord::BrokerControlledShutdown { node_id: b.node_id });
            }
        }
        for t in self.topics.values() {
            out.push(MetadataRecord::Topic { name: t.name.clone(), topic_id: t.topic_id });
            for (name, value) in &t.configs {
                out.push(MetadataRecord::TopicConfig {
                    topic_id: t.topic_id,
                    name: name.clone(),
                    value: Some(value.clone()),
                });
            }
            out.extend(t.partitions.iter().map(|p| p.to_record(t.topic_id)));
        }
        for (subscription, configs) in &self.client_metrics {
            for (name, value) in configs {
                out.push(MetadataRecord::ClientMetricsConfig {
                    subscription: subscription.clone(),
                    name: name.clone(),
                    value: Some(value.clone()),
                });
            }
        }
        for (resource, configs) in &self.broker_configs {
            for (name, value) in configs {
                out.push(MetadataRecord::BrokerConfig {
                    resource: resource.clone(),
                    name: name.clone(),
                    value: Some(value.clone()),
                });
            }
        }
        if self.next_producer_id != 0 {
            out.push(MetadataRecord::ProducerIds { next_producer_id: self.next_producer_id });
        }
        out.extend(
            self.features
                .iter()
                .map(|(name, level)| MetadataRecord::FeatureLevel { name: name.clone(), level: *level }),
        );
        out
    }

    /// The image `records` build, with `offset` as its metadata offset.
    pub fn from_records(records: &[MetadataRecord], offset: u64) -> MetadataImage {
        let mut image = MetadataImage::default();
        for r in records {
            image.apply(r);
        }
        image.offset = offset;
        image
    }

    fn topic_mut(&mut self, id: &Uuid) -> Option<&mut TopicImage> {
        let name = self.topic_names_by_id.get(id)?;
        self.topics.get_mut(name).map(Arc::make_mut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_lifecycle() {
        let id = Uuid::new_v4();
        let mut img = MetadataImage::default();
        img.apply(&MetadataRecord::Topic { name: "a".into(), topic_id: id });
        for p in 0..2 {
            img.apply(&MetadataRecord::Partition {
                topic_id: id,
                partition: p,
                replicas: vec![1],
                isr: vec![1],
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                adding_replicas: vec![],
                removing_replicas: vec![],
                eligible_leader_replicas: Vec::new(),
                last_known_elr: Vec::new(),
            });
        }
        img.apply(&MetadataRecord::TopicConfig { topic_id: id, name: "retention.ms".into(), value: Some("5".into()) });
        let t = img.topic("a").unwrap();
        assert_eq!(t.partitions.len(), 2);
        assert_eq!(t.configs.get("retention.ms").map(String::as_str), Some("5"));
        assert_eq!(img.topic_by_id(&id).unwrap().name, "a");
        img.apply(&MetadataRecord::TopicConfig { topic_id: id, name: "retention.ms".into(), value: None });
        assert!(img.topic("a").unwrap().configs.is_empty());
        img.apply(&MetadataRecord::RemoveTopic { topic_id: id });
        assert!(img.topic("a").is_none());
        assert!(img.topic_by_id(&id).is_none());
        assert_eq!(img.offset, 6);
    }

    #[test]
    fn records_rebuild_the_image() {
        let id = Uuid::new_v4();
        let mut img = MetadataImage::default();
        img.apply(&MetadataRecord::Cluster { cluster_id: "c".into() });
        img.apply(&MetadataRecord::RegisterBroker {
            node_id: 2,
            host: "h".into(),
            port: 1,
            rack: Some("r".into()),
            inter_broker: None,
            incarnation: None,
            metadata_format: crate::controller::records::METADATA_FORMAT,
        });
        let inter_broker = Some(Endpoint { host: "runnel-3".into(), port: 9094 });
        let incarnation = Some(Uuid::from_u128(3));
        img.apply(&MetadataRecord::RegisterBroker {
            node_id: 3,
            host: "h".into(),
            port: 2,
            rack: None,
            inter_broker,
            incarnation,
            metadata_format: 0,
        });
        img.apply(&MetadataRecord::Topic { name: "a".into(), topic_id: id });
        img.apply(&MetadataRecord::TopicConfig { topic_id: id, name: "retention.ms".into(), value: Some("5".into()) });
        img.apply(&MetadataRecord::Partition {
            topic_id: id,
            partition: 0,
            replicas: vec![2],
            isr: vec![2],
            leader: 2,
            leader_epoch: 3,
            partition_epoch: 4,
            adding_replicas: vec![],
            removing_replicas: vec![],
            eligible_leader_replicas: Vec::new(),
            last_known_elr: Vec::new(),
        });
        img.apply(&MetadataRecord::ProducerIds { next_producer_id: 1000 });
        img.apply(&MetadataRecord::ClientMetricsConfig {
            subscription: "lag".into(),
            name: "interval.ms".into(),
            value: Some("1000".into()),
        });
        assert_eq!(img.client_metrics["lag"]["interval.ms"], "1000");
        img.apply(&MetadataRecord::BrokerControlledShutdown { node_id: 3 });
        img.apply(&MetadataRecord::BrokerControlledShutdown { node_id: 7 });
        assert!(img.in_controlled_shutdown(3) && !img.broker_staying(3) && img.broker_alive(3));
        assert!(!img.in_controlled_shutdown(7), "not registered");
        let back = MetadataImage::from_records(&img.to_records(), img.offset);
        assert_eq!(format!("{back:?}"), format!("{img:?}"));
        // Broker 3's registration declared no record format: a record of format 1 waits.
        assert_eq!(img.brokers_behind(1), vec![3]);
        assert!(img.check_readable(&[MetadataRecord::BrokerFenced { node_id: 2, fenced: true }]).is_ok());
        let refused = img.check_readable(&[MetadataRecord::UnregisterBroker { node_id: 2 }]);
        assert!(matches!(&refused, Err(ControllerError::UnsupportedVersion(m)) if m.contains("[3]")), "{refused:?}");
        // Broker 3 itself may leave: it is not asked to read its own unregistration.
        assert!(img.check_readable(&[MetadataRecord::UnregisterBroker { node_id: 3 }]).is_ok());
    }

    #[test]
    fn a_controlled_shutdown_lasts_until_the_broker_is_fenced_or_let_back_in() {
        let mut img = MetadataImage::default();
        for node_id in [1, 2] {
            img.apply(&MetadataRecord::RegisterBroker {
                node_id,
                host: "h".into(),
                port: 1,
                rack: None,
                inter_broker: None,
                incarnation: None,
                metadata_format: crate::controller::records::METADATA_FORMAT,
            });
            img.apply(&MetadataRecord::BrokerControlledShutdown { node_id });
        }
        img.apply(&MetadataRecord::BrokerFenced { node_id: 1, fenced: true });
        img.apply(&MetadataRecord::BrokerFenced { node_id: 2, fenced: false });
        assert_eq!(img.controlled_shutdown, BTreeSet::new());
        assert!(!img.broker_alive(1) && img.broker_staying(2));
    }

    #[test]
    fn a_broker_is_reached_on_the_listener_asked_for_when_it_has_it() {
        let mut b = BrokerImage {
            node_id: 1,
            host: "localhost".into(),
            port: 32768,
            rack: None,
            fenced: false,
            inter_broker: None,
            incarnation: None,
            metadata_format: crate::controller::records::METADATA_FORMAT,
        };
        assert_eq!(b.endpoint(Listener::Client), ("localhost", 32768));
        assert_eq!(b.endpoint(Listener::InterBroker), ("localhost", 32768));
        b.inter_broker = Some(Endpoint { host: "runnel-1".into(), port: 9094 });
        assert_eq!(b.endpoint(Listener::Client), ("localhost", 32768));
        assert_eq!(b.endpoint(Listener::InterBroker), ("runnel-1", 9094));
    }
}
