//! Controller operations and the decisions the quorum leader makes about them: an
//! operation and the latest image in, the records to commit (or the error) out. Pure, so
//! the leader validates forwarded operations with the same code as its own.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::features::FeatureUpdate;
use super::image::{BrokerImage, MetadataImage, TopicImage};
use super::partition_change::{elect_leaderless, ElectionType};
use super::records::{Endpoint, MetadataRecord};
use super::{broker_config, client_metrics, eligible_leaders, placement, topic_config, ControllerError};

/// Kafka's limit on topic name length.
const MAX_TOPIC_NAME_LEN: usize = 249;
/// Upper bound on partitions per topic: a guard against a request that would create
/// millions of directories.
pub const MAX_PARTITIONS: i32 = 10_000;
/// Producer ids are committed in blocks so that handing one out costs no commit.
pub const PRODUCER_ID_BLOCK: i64 = 1000;

/// One partition's ISR change in a [`ControllerOp::AlterPartitions`]: the fields of
/// [`ControllerOp::AlterPartition`] that are the partition's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IsrAlteration {
    pub topic_id: Uuid,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub remove: Vec<i32>,
    pub add: Option<i32>,
    pub add_broker_epoch: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewTopic {
    pub name: String,
    /// -1 = broker default.
    pub num_partitions: i32,
    /// -1 = broker default.
    pub replication_factor: i16,
    /// Explicit replica lists per partition, if the request gave them.
    pub assignments: Vec<(i32, Vec<i32>)>,
    pub configs: Vec<(String, Option<String>)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ConfigChange {
    Set(String, String),
    Delete(String),
}

/// A metadata change a broker asks the quorum for. Broker defaults travel with the
/// operation: they are the asking broker's, whichever controller decides.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ControllerOp {
    CreateTopic {
        topic: NewTopic,
        default_partitions: i32,
        default_replication_factor: i16,
        validate_only: bool,
    },
    DeleteTopic {
        topic_id: Uuid,
    },
    CreatePartitions {
        name: String,
        total: i32,
        validate_only: bool,
        /// The replicas of each partition added, if the request named them (Kafka's
        /// `kafka-topics --alter --replica-assignment`). Absent from an older release's
        /// request: placed as before.
        #[serde(default)]
        assignments: Option<Vec<Vec<i32>>>,
    },
    AlterTopicConfigs {
        name: String,
        changes: Vec<ConfigChange>,
        validate_only: bool,
    },
    /// Change the configs of a client-metrics subscription (created by its first config,
    /// gone with its last).
    AlterClientMetrics {
        subscription: String,
        changes: Vec<ConfigChange>,
        validate_only: bool,
    },
    /// Change dynamic broker configs: one broker's (`resource` = its node id) or the
    /// cluster default's (`resource` = "").
    AlterBrokerConfigs {
        resource: String,
        changes: Vec<ConfigChange>,
        validate_only: bool,
    },
    /// The next block of [`PRODUCER_ID_BLOCK`] producer ids.
    AllocateProducerIds,
    /// A broker-only node asks to follow the metadata log: the leader adds it to the Raft
    /// group as a learner (a non-voting member the log is replicated to).
    AddObserver {
        node_id: i32,
        controller_addr: String,
        /// The directory of the node's metadata log (none from an older release).
        #[serde(default)]
        directory_id: Option<Uuid>,
        /// Passed on by a member that is not the leader (which passes it on only once).
        #[serde(default)]
        relayed: bool,
    },
    /// AddRaftVoter (`kafka-metadata-quorum add-controller`, KIP-853): make learner
    /// `node_id`, whose metadata log is in directory `directory_id`, a voter once it
    /// has caught up with the leader's log.
    AddRaftVoter {
        node_id: i32,
        directory_id: Uuid,
    },
    /// RemoveRaftVoter (`kafka-metadata-quorum remove-controller`): voter `node_id`,
    /// named with its directory id (the nil uuid for a voter that has none), becomes a
    /// learner: it still follows the metadata log, and its broker still serves.
    RemoveRaftVoter {
        node_id: i32,
        directory_id: Uuid,
    },
    /// A broker process is alive (every `broker.heartbeat.interval.ms`); with
    /// `want_shut_down` it asks for its leadership to move off before it stops.
    /// `offline_replicas`: all of its replicas in log dirs that failed (topic id,
    /// partition), as Kafka's heartbeat carries the broker's offline dirs, so that a new
    /// controller leader knows them from the first heartbeat. (None from a broker of an
    /// older release, which reports them with [`ControllerOp::ReplicasOffline`] only.)
    BrokerHeartbeat {
        node_id: i32,
        incarnation: Uuid,
        want_shut_down: bool,
        #[serde(default)]
        offline_replicas: Option<Vec<(Uuid, i32)>>,
        /// The newest record format the process reads (0 from an older release).
        #[serde(default)]
        metadata_format: u16,
        /// The process started after a clean shutdown of the one before it (Kafka's
        /// `PreviousBrokerEpoch` in BrokerRegistration): the controller reads it when a new
        /// process registers, and takes one that did not out of the ISRs and ELRs it is in
        /// (false from an older release, which keeps no ELR).
        #[serde(default)]
        clean_shutdown: bool,
    },
    /// The leader's periodic check: fence brokers whose session expired.
    ExpireBrokers,
    /// A partition leader asks to take `remove` out of the ISR or `add` into it
    /// (Kafka's AlterPartition), against the ISR of `partition_epoch`: a proposal made
    /// in an older partition epoch is refused (INVALID_UPDATE_VERSION) unless it is
    /// already what the ISR is, and one from a process of `broker` that was replaced
    /// (`incarnation`, the one its heartbeats name) is refused too (STALE_BROKER_EPOCH).
    /// (None, from a broker of an older release: the current epoch, any process.)
    /// `add_broker_epoch` names the process of `add` whose fetch showed it caught up
    /// (KIP-903): a process that has since been replaced, and may have come back without
    /// the records it fetched, does not join (INELIGIBLE_REPLICA).
    AlterPartition {
        broker: i32,
        topic_id: Uuid,
        partition: i32,
        leader_epoch: i32,
        #[serde(default)]
        partition_epoch: Option<i32>,
        #[serde(default)]
        incarnation: Option<Uuid>,
        remove: Vec<i32>,
        add: Option<i32>,
        #[serde(default)]
        add_broker_epoch: Option<i64>,
    },
    /// Many partitions' ISR changes from one process of leader `broker` in one request,
    /// as Kafka's AlterPartition carries every change a broker has pending. Each is
    /// decided as [`ControllerOp::AlterPartition`] would be, against the image the
    /// changes before it make; all that pass commit together, and each refused one is
    /// answered on its own (`OpReply::refused`).
    AlterPartitions {
        broker: i32,
        incarnation: Uuid,
        changes: Vec<IsrAlteration>,
    },
    /// Broker `broker` lost the log directory holding these partitions (topic id,
    /// partition): its replicas of them are offline (Kafka's offline log dirs in
    /// BrokerHeartbeat). It leaves their ISRs and leadership moves to the ISR's others.
    ReplicasOffline {
        broker: i32,
        partitions: Vec<(Uuid, i32)>,
    },
    /// ElectLeaders: an election for each partition (topic name, partition), or for every
    /// partition when `None`. Decided with the leader's view of which brokers are alive.
    ElectLeaders {
        election: ElectionType,
        partitions: Option<Vec<(String, i32)>>,
    },
    /// AlterPartitionReassignments: per partition (topic name, partition), the target
    /// replicas, or `None` to cancel a reassignment in progress.
    AlterReassignments {
        partitions: Vec<(String, i32, Option<Vec<i32>>)>,
        allow_replication_factor_change: bool,
    },
    /// DescribeQuorum: the leader's view of the quorum (no records; read-only).
    DescribeQuorum,
    /// UpdateFeatures (`kafka-features upgrade|downgrade|disable`): set finalized feature
    /// levels, all or none (`features::update`, decided by the leader, which names itself
    /// in a refusal as Kafka's does).
    UpdateFeatures {
        updates: Vec<FeatureUpdate>,
        validate_only: bool,
    },
    /// UnregisterBroker (`kafka-cluster unregister`): drop broker `node_id`'s
    /// registration, after taking it out of ISRs and leadership as fencing does
    /// (Kafka's `ReplicationControlManager.unregisterBroker`). Refused for a broker that
    /// is not registered (BROKER_ID_NOT_REGISTERED). A process of it that still runs
    /// has its heartbeats refused until it restarts and registers again, as in Kafka.
    UnregisterBroker {
        node_id: i32,
    },
    /// A broker's address and rack; the first registration also names the cluster.
    RegisterBroker {
        node_id: i32,
        host: String,
        port: u16,
        rack: Option<String>,
        cluster_id: Option<String>,
        /// The inter-broker listener's address, when the broker has that listener.
        #[serde(default)]
        inter_broker: Option<Endpoint>,
        /// In a cluster a new broker joins fenced: it gets no replicas and leads nothing
        /// until its heartbeats let it in (a single node is never fenced).
        #[serde(default)]
        fenced: bool,
        /// The newest record format the process reads (0 from an older release).
        #[serde(default)]
        metadata_format: u16,
    },
}

impl ControllerOp {
    pub fn validate_only(&self) -> bool {
        match self {
            ControllerOp::CreateTopic { validate_only, .. }
            | ControllerOp::CreatePartitions { validate_only, .. }
            | ControllerOp::AlterTopicConfigs { validate_only, .. }
            | ControllerOp::AlterClientMetrics { validate_only, .. }
            | ControllerOp::AlterBrokerConfigs { validate_only, .. }
            | ControllerOp::UpdateFeatures { validate_only, .. } => *validate_only,
            _ => false,
        }
    }
}

/// The records `op` commits on `image`, or why it is refused. `start` seeds replica
/// placement (random in the controller, fixed in tests).
pub fn decide(image: &MetadataImage, op: &ControllerOp, start: usize) -> Result<Vec<MetadataRecord>, ControllerError> {
    match op {
        ControllerOp::CreateTopic { topic, default_partitions, default_replication_factor, .. } => {
            create_topic(image, topic, *default_partitions, *default_replication_factor, start)
        }
        ControllerOp::DeleteTopic { topic_id } => {
            if image.topic_by_id(topic_id).is_none() {
                return Err(ControllerError::UnknownTopic(topic_id.to_string()));
            }
            Ok(vec![MetadataRecord::RemoveTopic { topic_id: *topic_id }])
        }
        ControllerOp::CreatePartitions { name, total, assignments, .. } => {
            create_partitions(image, name, *total, assignments.as_deref(), start)
        }
        ControllerOp::AlterTopicConfigs { name, changes, .. } => {
            alter_topic_configs(image, name, changes).map(|r| eligible_leaders::cleared_after_config_change(image, r))
        }
        ControllerOp::AlterClientMetrics { subscription, changes, .. } => {
            alter_client_metrics(image, subscription, changes)
        }
        ControllerOp::AlterBrokerConfigs { resource, changes, .. } => broker_config::alter(image, resource, changes)
            .map(|r| eligible_leaders::cleared_after_config_change(image, r)),
        // Membership changes, not metadata records: the leader carries them out itself.
        ControllerOp::AddObserver { .. } | ControllerOp::AddRaftVoter { .. } | ControllerOp::RemoveRaftVoter { .. } => {
            Ok(Vec::new())
        }
        // Decided with the leader's view of broker liveness (`cluster_ops.rs`).
        ControllerOp::BrokerHeartbeat { .. }
        | ControllerOp::ExpireBrokers
        | ControllerOp::AlterPartition { .. }
        | ControllerOp::AlterPartitions { .. }
        | ControllerOp::ReplicasOffline { .. }
        | ControllerOp::ElectLeaders { .. }
        | ControllerOp::AlterReassignments { .. }
        | ControllerOp::UnregisterBroker { .. } => {
            Err(ControllerError::Internal("a liveness operation needs the leader's broker liveness".into()))
        }
        ControllerOp::DescribeQuorum => Err(ControllerError::Internal("the quorum is described by its leader".into())),
        ControllerOp::UpdateFeatures { .. } => {
            Err(ControllerError::Internal("feature levels are decided by the leader, which names itself".into()))
        }
        ControllerOp::AllocateProducerIds => {
            Ok(vec![MetadataRecord::ProducerIds { next_producer_id: image.next_producer_id + PRODUCER_ID_BLOCK }])
        }
        ControllerOp::RegisterBroker {
            node_id,
            host,
            port,
            rack,
            cluster_id,
            inter_broker,
            fenced,
            metadata_format,
        } => {
            let mut records = Vec::new();
            if image.cluster_id.is_empty() {
                let id = cluster_id.clone().unwrap_or_else(new_cluster_id);
                records.push(MetadataRecord::Cluster { cluster_id: id });
            }
            let current = image.brokers.get(node_id);
            let changed = |b: &BrokerImage| {
                b.host != *host
                    || b.port != *port
                    || b.rack != *rack
                    || b.inter_broker != *inter_broker
                    || b.metadata_format != *metadata_format
            };
            if current.is_none_or(changed) {
                records.push(MetadataRecord::RegisterBroker {
                    node_id: *node_id,
                    host: host.clone(),
                    port: *port,
                    rack: rack.clone(),
                    inter_broker: inter_broker.clone(),
                    incarnation: None,
                    metadata_format: *metadata_format,
                });
                if *fenced && current.is_none() {
                    records.push(MetadataRecord::BrokerFenced { node_id: *node_id, fenced: true });
                }
            }
            if !*fenced {
                // A single node (registered unfenced: nobody heartbeats) that comes back
                // after an UnregisterBroker, or was restarted after one by a release that
                // did not register again, leads the partitions it is eligible for again.
                let mut after = image.clone();
                records.iter().for_each(|r| after.apply(r));
                records.extend(elect_leaderless(&after, &|r| after.broker_alive(r)));
            }
            Ok(records)
        }
    }
}

/// The topic a validate-only CreateTopics would create, from the records decided for it.
pub fn topic_of(records: &[MetadataRecord], name: &str) -> Result<std::sync::Arc<TopicImage>, ControllerError> {
    let image = MetadataImage::from_records(records, 0);
    image.topic(name).cloned().ok_or_else(|| ControllerError::Internal("no topic".into()))
}

fn create_topic(
    image: &MetadataImage,
    req: &NewTopic,
    default_partitions: i32,
    default_replication_factor: i16,
    start: usize,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    validate_topic_name(&req.name)?;
    if image.topic(&req.name).is_some() {
        return Err(ControllerError::TopicAlreadyExists(req.name.clone()));
    }
    let canonical = req.name.replace('.', "_");
    if let Some(other) = image.topics.keys().find(|t| t.replace('.', "_") == canonical) {
        return Err(ControllerError::InvalidTopic(format!(
            "Topic '{}' collides with existing topic: {other}",
            req.name
        )));
    }
    let assignments: Vec<Vec<i32>> = if !req.assignments.is_empty() {
        if req.num_partitions != -1 || req.replication_factor != -1 {
            return Err(ControllerError::InvalidReplicaAssignment(
                "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.".into(),
            ));
        }
        let mut sorted = req.assignments.clone();
        sorted.sort_by_key(|(p, _)| *p);
        for (i, (p, replicas)) in sorted.iter().enumerate() {
            if *p != i as i32 {
                return Err(ControllerError::InvalidReplicaAssignment(
                    "Partitions should be a consecutive 0-based integer sequence".into(),
                ));
            }
            // Every partition as many replicas as the first (Kafka's check).
            validate_manual_assignment(image, replicas, (i > 0).then(|| sorted[0].1.len()))?;
            if !replicas.iter().any(|r| image.broker_staying(*r)) {
                return Err(ControllerError::InvalidReplicaAssignment(format!(
                    "All brokers specified in the manual partition assignment for partition {p} are fenced or in controlled shutdown."
                )));
            }
        }
        if sorted.len() as i32 > MAX_PARTITIONS {
            return Err(ControllerError::InvalidPartitions(format!("Too many partitions (max {MAX_PARTITIONS})")));
        }
        sorted.into_iter().map(|(_, r)| r).collect()
    } else {
        let partitions = if req.num_partitions == -1 { default_partitions } else { req.num_partitions };
        if partitions <= 0 {
            return Err(ControllerError::InvalidPartitions("Number of partitions must be larger than 0.".into()));
        }
        if partitions > MAX_PARTITIONS {
            return Err(ControllerError::InvalidPartitions(format!(
                "Number of partitions {partitions} exceeds the maximum of {MAX_PARTITIONS}."
            )));
        }
        let rf = if req.replication_factor == -1 { default_replication_factor } else { req.replication_factor };
        if rf <= 0 {
            return Err(ControllerError::InvalidReplicationFactor("Replication factor must be larger than 0.".into()));
        }
        // Replicas go on brokers that are in the cluster now (Kafka skips fenced ones).
        let brokers: Vec<_> = image.brokers.values().filter(|b| !b.fenced).cloned().collect();
        if rf as usize > brokers.len() {
            return Err(ControllerError::InvalidReplicationFactor(format!(
                "Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {} broker(s) are registered.",
                brokers.len()
            )));
        }
        placement::place(&brokers, 0, partitions, rf as usize, start)
    };
    let mut seen = BTreeMap::new();
    for (name, value) in &req.configs {
        let value = value.as_deref().ok_or_else(|| {
            ControllerError::InvalidConfig(format!("Null value not supported for topic configs: {name}"))
        })?;
        topic_config::validate(name, value).map_err(ControllerError::InvalidConfig)?;
        seen.insert(name.clone(), value.to_owned());
    }
    let topic_id = Uuid::new_v4();
    let mut records = vec![MetadataRecord::Topic { name: req.name.clone(), topic_id }];
    for (name, value) in seen {
        records.push(MetadataRecord::TopicConfig { topic_id, name, value: Some(value) });
    }
    for (p, replicas) in assignments.into_iter().enumerate() {
        records.push(new_partition(image, topic_id, p as i32, replicas)?);
    }
    Ok(records)
}

/// Kafka's checks of a replica list a request names (`validateManualPartitionAssignment`,
/// with its messages): not empty, every broker registered, none twice, and as many
/// replicas as the topic's other partitions have (when `replication_factor` is known).
fn validate_manual_assignment(
    image: &MetadataImage,
    replicas: &[i32],
    replication_factor: Option<usize>,
) -> Result<(), ControllerError> {
    if replicas.is_empty() {
        return Err(ControllerError::InvalidReplicaAssignment(
            "The manual partition assignment includes an empty replica list.".into(),
        ));
    }
    let mut sorted = replicas.to_vec();
    sorted.sort_unstable();
    for (i, broker) in sorted.iter().enumerate() {
        if !image.brokers.contains_key(broker) {
            return Err(ControllerError::InvalidReplicaAssignment(format!(
                "The manual partition assignment includes broker {broker}, but no such broker is registered."
            )));
        }
        if i > 0 && sorted[i - 1] == *broker {
            return Err(ControllerError::InvalidReplicaAssignment(format!(
                "The manual partition assignment includes the broker {broker} more than once."
            )));
        }
    }
    match replication_factor {
        Some(rf) if rf != sorted.len() => Err(ControllerError::InvalidReplicaAssignment(format!(
            "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {rf} replica(s).",
            sorted.len()
        ))),
        _ => Ok(()),
    }
}

/// A new partition on `replicas`: its ISR is those of them that are in the cluster now
/// (registered, unfenced, not shutting down), led by the first, as Kafka places a new
/// partition; where every one of them is shutting down (placement still counts a
/// broker in controlled shutdown until it is fenced), the unfenced ones, whose
/// leadership the shutdown then moves as it moves the rest. With none unfenced it is
/// refused, with Kafka's code.
fn new_partition(
    image: &MetadataImage,
    topic_id: Uuid,
    partition: i32,
    replicas: Vec<i32>,
) -> Result<MetadataRecord, ControllerError> {
    let staying: Vec<i32> = replicas.iter().copied().filter(|r| image.broker_staying(*r)).collect();
    let isr = if staying.is_empty() {
        replicas.iter().copied().filter(|r| image.broker_alive(*r)).collect()
    } else {
        staying
    };
    let Some(&leader) = isr.first() else {
        return Err(ControllerError::InvalidReplicationFactor(format!(
            "Unable to replicate the partition {} time(s): All brokers are currently fenced or in controlled shutdown.",
            replicas.len()
        )));
    };
    Ok(MetadataRecord::Partition {
        topic_id,
        partition,
        leader,
        isr,
        replicas,
        leader_epoch: 0,
        partition_epoch: 0,
        adding_replicas: vec![],
        removing_replicas: vec![],
        eligible_leader_replicas: Vec::new(),
        last_known_elr: Vec::new(),
    })
}

/// Grow a topic to `total` partitions (Kafka never shrinks), with the replication factor
/// of its first partition.
fn create_partitions(
    image: &MetadataImage,
    name: &str,
    total: i32,
    assignments: Option<&[Vec<i32>]>,
    start: usize,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let topic = image.topic(name).ok_or_else(|| ControllerError::UnknownTopic(name.to_owned()))?;
    let current = topic.partitions.len() as i32;
    if total < current {
        return Err(ControllerError::InvalidPartitions(format!(
            "The topic {name} currently has {current} partition(s); {total} would not be an increase."
        )));
    }
    if total == current {
        return Err(ControllerError::InvalidPartitions(format!("Topic already has {current} partition(s).")));
    }
    if total > MAX_PARTITIONS {
        return Err(ControllerError::InvalidPartitions(format!(
            "Number of partitions {total} exceeds the maximum of {MAX_PARTITIONS}."
        )));
    }
    let additional = (total - current) as usize;
    let rf = topic.partitions.first().map_or(1, |p| p.replicas.len()).max(1);
    let placed = match assignments {
        Some(manual) => {
            if manual.len() != additional {
                return Err(ControllerError::InvalidReplicaAssignment(format!(
                    "Attempted to add {additional} additional partition(s), but only {} assignment(s) were specified.",
                    manual.len()
                )));
            }
            for (i, replicas) in manual.iter().enumerate() {
                validate_manual_assignment(image, replicas, Some(rf))?;
                if !replicas.iter().any(|r| image.broker_staying(*r)) {
                    return Err(ControllerError::InvalidReplicaAssignment(format!(
                        "All brokers specified in the manual partition assignment for partition {} are fenced or in controlled shutdown.",
                        current as usize + i
                    )));
                }
            }
            manual.to_vec()
        }
        None => {
            let brokers: Vec<_> = image.brokers.values().filter(|b| !b.fenced).cloned().collect();
            if rf > brokers.len() {
                return Err(ControllerError::InvalidReplicationFactor(format!(
                    "Unable to replicate the partition {rf} time(s): only {} broker(s) are registered.",
                    brokers.len()
                )));
            }
            placement::place(&brokers, current, total - current, rf, start)
        }
    };
    (current..total).zip(placed).map(|(p, replicas)| new_partition(image, topic.topic_id, p, replicas)).collect()
}

/// Config changes to a topic, all or none.
/// Kafka validates the configs a subscription ends up with, not each change.
fn alter_client_metrics(
    image: &MetadataImage,
    subscription: &str,
    changes: &[ConfigChange],
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let mut result = image.client_metrics.get(subscription).cloned().unwrap_or_default();
    let mut records = Vec::new();
    for change in changes {
        let (name, value) = match change {
            ConfigChange::Set(k, v) => {
                result.insert(k.clone(), v.clone());
                (k, Some(v.clone()))
            }
            ConfigChange::Delete(k) => {
                result.remove(k);
                (k, None)
            }
        };
        records.push(MetadataRecord::ClientMetricsConfig {
            subscription: subscription.to_owned(),
            name: name.clone(),
            value,
        });
    }
    client_metrics::validate(subscription, &result).map_err(|e| match e {
        client_metrics::ClientMetricsConfigError::InvalidRequest(m) => ControllerError::InvalidRequest(m),
        client_metrics::ClientMetricsConfigError::InvalidConfig(m) => ControllerError::InvalidConfig(m),
    })?;
    Ok(records)
}

fn alter_topic_configs(
    image: &MetadataImage,
    name: &str,
    changes: &[ConfigChange],
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let topic = image.topic(name).ok_or_else(|| ControllerError::UnknownTopic(name.to_owned()))?;
    let mut records = Vec::new();
    for change in changes {
        match change {
            ConfigChange::Set(k, v) => {
                topic_config::validate(k, v).map_err(ControllerError::InvalidConfig)?;
                records.push(MetadataRecord::TopicConfig {
                    topic_id: topic.topic_id,
                    name: k.clone(),
                    value: Some(v.clone()),
                });
            }
            ConfigChange::Delete(k) => {
                if topic_config::find(k).is_none() {
                    return Err(ControllerError::InvalidConfig(format!("Unknown topic config name: {k}")));
                }
                records.push(MetadataRecord::TopicConfig { topic_id: topic.topic_id, name: k.clone(), value: None });
            }
        }
    }
    Ok(records)
}

fn new_cluster_id() -> String {
    // Kafka cluster ids are a base64url-encoded UUID (22 chars).
    let id = Uuid::new_v4();
    let mut s = String::with_capacity(22);
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let v = id.as_u128();
    for i in 0..22 {
        let shift = 128i32 - 6 * (i + 1);
        let idx = if shift >= 0 { (v >> shift) & 0x3f } else { (v << (-shift)) & 0x3f };
        s.push(ALPHABET[idx as usize] as char);
    }
    s
}

/// Kafka's topic name rules (`org.apache.kafka.common.internals.Topic.validate`).
pub fn validate_topic_name(name: &str) -> Result<(), ControllerError> {
    let err = |m: String| Err(ControllerError::InvalidTopic(m));
    if name.is_empty() {
        return err("Topic name is illegal, it can't be empty".into());
    }
    if name == "." || name == ".." {
        return err("Topic name cannot be \".\" or \"..\"".into());
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return err(format!(
            "Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LEN} characters, topic name: {name}"
        ));
    }
    if !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'_' || c == b'-') {
        return err(format!(
            "Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn register(inter_broker: Option<Endpoint>) -> ControllerOp {
        ControllerOp::RegisterBroker {
            node_id: 1,
            host: "localhost".into(),
            port: 32768,
            rack: None,
            cluster_id: Some("c".into()),
            inter_broker,
            fenced: true,
            metadata_format: crate::controller::records::METADATA_FORMAT,
        }
    }

    /// A broker restarted with an inter-broker listener (or without it) registers anew;
    /// one restarted as it was writes nothing.
    #[test]
    fn a_changed_inter_broker_listener_is_registered_again() {
        let mut image = MetadataImage::default();
        for r in decide(&image, &register(None), 0).unwrap() {
            image.apply(&r);
        }
        assert_eq!(decide(&image, &register(None), 0).unwrap(), vec![]);
        let endpoint = Endpoint { host: "runnel-1".into(), port: 9094 };
        let records = decide(&image, &register(Some(endpoint.clone())), 0).unwrap();
        assert_eq!(records.len(), 1, "{records:?}");
        image.apply(&records[0]);
        assert_eq!(image.brokers[&1].inter_broker, Some(endpoint.clone()));
        assert!(image.brokers[&1].fenced, "a new registration keeps the broker's fencing");
        assert_eq!(decide(&image, &register(Some(endpoint)), 0).unwrap(), vec![]);
    }

    fn apply(image: &mut MetadataImage, records: &[MetadataRecord]) {
        records.iter().for_each(|r| image.apply(r));
    }

    /// Decide `op` and apply what it commits.
    fn step(image: &mut MetadataImage, op: &ControllerOp) {
        let records = decide(image, op, 0).unwrap();
        apply(image, &records);
    }

    /// Brokers 1–3 registered and unfenced, `fenced` among them fenced, and topic `t` of
    /// one partition on [1, 2].
    fn cluster(fenced: &[i32]) -> MetadataImage {
        let mut image = MetadataImage::default();
        for id in 1..=3 {
            image.apply(&MetadataRecord::test_registration(id, crate::controller::records::METADATA_FORMAT));
            image.apply(&MetadataRecord::BrokerFenced { node_id: id, fenced: fenced.contains(&id) });
        }
        step(&mut image, &create_topic_t(-1, -1, vec![(0, vec![1, 2])]));
        image
    }

    /// CreateTopics of topic `t`.
    fn create_topic_t(num_partitions: i32, replication_factor: i16, assignments: Vec<(i32, Vec<i32>)>) -> ControllerOp {
        let topic = NewTopic { name: "t".into(), num_partitions, replication_factor, assignments, configs: vec![] };
        ControllerOp::CreateTopic { topic, default_partitions: 1, default_replication_factor: 1, validate_only: false }
    }

    fn grow(total: i32, assignments: Option<Vec<Vec<i32>>>) -> ControllerOp {
        ControllerOp::CreatePartitions { name: "t".into(), total, validate_only: false, assignments }
    }

    fn refusal(r: Result<Vec<MetadataRecord>, ControllerError>) -> String {
        match r {
            Err(ControllerError::InvalidReplicaAssignment(m)) => m,
            other => panic!("expected INVALID_REPLICA_ASSIGNMENT, got {other:?}"),
        }
    }

    /// CreatePartitions with `--replica-assignment`: the replicas named are used; a broker
    /// that does not exist, a wrong count, a wrong replication factor or a broker named
    /// twice is refused with Kafka's code and message. (Before, the assignment was
    /// dropped and any broker id accepted.)
    #[test]
    fn create_partitions_uses_the_assignment_and_refuses_one_kafka_refuses() {
        let image = cluster(&[]);
        let records = decide(&image, &grow(3, Some(vec![vec![3, 1], vec![2, 3]])), 0).unwrap();
        let placed: Vec<_> = records
            .iter()
            .map(|r| match r {
                MetadataRecord::Partition { partition, replicas, leader, isr, .. } => {
                    (*partition, replicas.clone(), *leader, isr.clone())
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(placed, vec![(1, vec![3, 1], 3, vec![3, 1]), (2, vec![2, 3], 2, vec![2, 3])]);

        assert_eq!(
            refusal(decide(&image, &grow(2, Some(vec![vec![7, 1]])), 0)),
            "The manual partition assignment includes broker 7, but no such broker is registered."
        );
        assert_eq!(
            refusal(decide(&image, &grow(3, Some(vec![vec![2, 1]])), 0)),
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."
        );
        assert_eq!(
            refusal(decide(&image, &grow(2, Some(vec![vec![3]])), 0)),
            "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent with previous partitions, which have 2 replica(s)."
        );
        assert_eq!(
            refusal(decide(&image, &grow(2, Some(vec![vec![3, 3]])), 0)),
            "The manual partition assignment includes the broker 3 more than once."
        );
        assert_eq!(
            refusal(decide(&image, &grow(2, Some(vec![vec![]])), 0)),
            "The manual partition assignment includes an empty replica list."
        );
        // Without an assignment the controller places them, as before.
        assert_eq!(decide(&image, &grow(3, None), 0).unwrap().len(), 2);
    }

    /// A new partition's ISR is the replicas in the cluster now, led by the first of
    /// them; with none in the cluster the assignment is refused (Kafka's checks).
    #[test]
    fn a_new_partition_on_fenced_brokers_leaves_them_out_of_its_isr() {
        let image = cluster(&[3]);
        let records = decide(&image, &grow(2, Some(vec![vec![3, 2]])), 0).unwrap();
        assert!(
            matches!(&records[..], [MetadataRecord::Partition { leader: 2, isr, .. }] if *isr == vec![2]),
            "{records:?}"
        );
        let image = cluster(&[2, 3]);
        assert_eq!(
            refusal(decide(&image, &grow(2, Some(vec![vec![3, 2]])), 0)),
            "All brokers specified in the manual partition assignment for partition 1 are fenced or in controlled shutdown."
        );
        // CreateTopics the same way, and every partition as many replicas as the first.
        let mut create = create_topic_t(-1, -1, vec![(0, vec![3, 2])]);
        if let ControllerOp::CreateTopic { topic, .. } = &mut create {
            topic.name = "u".into();
        }
        assert_eq!(
            refusal(decide(&image, &create, 0)),
            "All brokers specified in the manual partition assignment for partition 0 are fenced or in controlled shutdown."
        );
        if let ControllerOp::CreateTopic { topic, .. } = &mut create {
            topic.assignments = vec![(0, vec![1]), (1, vec![1, 2])];
        }
        assert_eq!(
            refusal(decide(&image, &create, 0)),
            "The manual partition assignment includes a partition with 2 replica(s), but this is not consistent with previous partitions, which have 1 replica(s)."
        );
    }

    /// A single node whose registration an UnregisterBroker removed (its partitions left
    /// leaderless) registers again unfenced and leads its partitions again; a data dir
    /// left so by an earlier release recovers the same way at its next start.
    #[test]
    fn a_single_node_registering_again_leads_its_leaderless_partitions() {
        let mut image = MetadataImage::default();
        let mut single = register(None);
        if let ControllerOp::RegisterBroker { fenced, .. } = &mut single {
            *fenced = false;
        }
        step(&mut image, &single);
        step(&mut image, &create_topic_t(2, 1, vec![]));
        // What the liveness decision of UnregisterBroker commits on a single node.
        let removed = super::super::partition_change::remove_broker(&image, 1, &|_| false);
        apply(&mut image, &removed);
        apply(&mut image, &[MetadataRecord::UnregisterBroker { node_id: 1 }]);
        let leaders =
            |image: &MetadataImage| image.topic("t").unwrap().partitions.iter().map(|p| p.leader).collect::<Vec<_>>();
        assert_eq!(leaders(&image), vec![-1, -1], "unregistered, nobody leads");

        step(&mut image, &single);
        assert!(image.broker_alive(1));
        assert_eq!(leaders(&image), vec![1, 1]);
        // Registered again and leading: nothing more to write.
        assert_eq!(decide(&image, &single, 0).unwrap(), vec![]);
    }
}
