//! Metadata records: the events that make up cluster metadata.
//!
//! Like KRaft's `__cluster_metadata`, the metadata of a runnel cluster is an ordered log of
//! these records; the [`MetadataImage`](super::MetadataImage) is what you get by applying
//! them in order. Records are facts that already passed validation: applying one never
//! fails.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A listener's advertised address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

/// The newest metadata record format this build reads and writes (runnel's counterpart of
/// Kafka's `metadata.version` for its own records). A node of an older release cannot read
/// a record of a newer format: its metadata log would stop at it, and the node exit. So
/// the controller leader writes a record only when every registered broker declared
/// (in its registration or heartbeats) that it reads the record's format; until then the
/// operation that needs it is refused with UNSUPPORTED_VERSION
/// ([`MetadataRecord::format_level`], [`MetadataImage::brokers_behind`]).
///
/// * 0: the records of releases before the format was declared.
/// * 1: [`MetadataRecord::UnregisterBroker`].
/// * 2: voters the Raft membership names and `--controller-quorum-voters` does not
///   ([`VOTERS_IN_MEMBERSHIP`]).
/// * 3: eligible leader replicas (KIP-966): a partition record whose ISR may be empty and
///   that names `eligible_leader_replicas` and `last_known_elr`
///   ([`ELIGIBLE_LEADER_REPLICAS`]).
/// * 4: [`MetadataRecord::FeatureLevel`] ([`FEATURE_LEVELS`]).
///
/// [`MetadataImage::brokers_behind`]: super::MetadataImage::brokers_behind
pub const METADATA_FORMAT: u16 = 4;

/// The format from which a node finds the controller leader through the Raft membership,
/// not only among the voters its flags name: AddRaftVoter waits for it, since a node of an
/// older release could not reach a leader that AddRaftVoter added (its heartbeats would
/// fail, and it would be fenced).
pub const VOTERS_IN_MEMBERSHIP: u16 = 2;

/// The format from which the controller keeps eligible leader replicas (KIP-966): an
/// older release reads an empty ISR as a partition that cannot be led again, so the
/// controller keeps the ISR's last member in it until every broker reads this format.
pub const ELIGIBLE_LEADER_REPLICAS: u16 = 3;

/// The format from which a feature's finalized level is a record (UpdateFeatures).
pub const FEATURE_LEVELS: u16 = 4;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum MetadataRecord {
    /// The cluster's identity, written once when the data dir is first formatted.
    Cluster {
        cluster_id: String,
    },
    /// `host`/`port`: the client listener's advertised address.
    RegisterBroker {
        node_id: i32,
        host: String,
        port: u16,
        rack: Option<String>,
        /// The inter-broker listener's advertised address, when the broker has one
        /// (Kafka: the endpoint of `inter.broker.listener.name`). Absent from records
        /// written before it existed and from brokers without that listener, so those
        /// records keep their old bytes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inter_broker: Option<Endpoint>,
        /// The broker process registered (the incarnation id its heartbeats name; Kafka's
        /// broker registration carries it too), so that a controller that becomes leader
        /// later knows which process the ISRs were decided with. Absent when the record
        /// only changes the address (the process stays what it was), and from records
        /// written before it existed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        incarnation: Option<Uuid>,
        /// The newest record format ([`METADATA_FORMAT`]) the registered process reads.
        /// 0 when absent: from a broker or a controller leader of a release before it
        /// existed, which the newer records must wait for.
        #[serde(default, skip_serializing_if = "is_zero")]
        metadata_format: u16,
    },
    Topic {
        name: String,
        topic_id: Uuid,
    },
    Partition {
        topic_id: Uuid,
        partition: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        /// A reassignment in progress (Kafka's `addingReplicas`/`removingReplicas`):
        /// replicas catching up to join, and replicas to drop once they have. `replicas`
        /// holds both sides meanwhile. Empty when no reassignment runs.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        adding_replicas: Vec<i32>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        removing_replicas: Vec<i32>,
        /// Eligible leader replicas (Kafka's `EligibleLeaderReplicas`, KIP-966): replicas
        /// that left the ISR while it was smaller than `min.insync.replicas`. The high
        /// watermark cannot move while the ISR is that small, so each of them holds every
        /// record below it, and one may lead when no ISR member can. Never overlaps the ISR.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        eligible_leader_replicas: Vec<i32>,
        /// Kafka's `LastKnownElr`, as Kafka 4 uses it: the last leader, kept while the
        /// partition has none, which may lead again when it returns and no ISR or ELR
        /// member can.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        last_known_elr: Vec<i32>,
    },
    /// Set (`value: Some`) or remove (`None`) one config of a topic.
    TopicConfig {
        topic_id: Uuid,
        name: String,
        value: Option<String>,
    },
    RemoveTopic {
        topic_id: Uuid,
    },
    /// Set (`value: Some`) or remove (`None`) one config of a KIP-714 client-metrics
    /// subscription (Kafka's ConfigRecord on a CLIENT_METRICS resource).
    ClientMetricsConfig {
        subscription: String,
        name: String,
        value: Option<String>,
    },
    /// Set (`value: Some`) or remove (`None`) one dynamic broker config (Kafka's
    /// ConfigRecord on a BROKER resource): `resource` is a node id, or "" for the
    /// cluster-wide default.
    BrokerConfig {
        resource: String,
        name: String,
        value: Option<String>,
    },
    /// Producer ids below `next_producer_id` are handed out; a restart continues above it.
    ProducerIds {
        next_producer_id: i64,
    },
    /// The controller fenced a broker (it missed its heartbeats or restarted) or let it
    /// back in. A fenced broker leads nothing and is not listed to clients.
    BrokerFenced {
        node_id: i32,
        fenced: bool,
    },
    /// The broker asked to shut down (Kafka's `InControlledShutdown`, KIP-841): from now
    /// on it is elected nowhere and joins no ISR, under this controller leader and the
    /// ones after it, until a `BrokerFenced` record (it stopped, or came back) clears it.
    BrokerControlledShutdown {
        node_id: i32,
    },
    /// The broker's registration is dropped (Kafka's UnregisterBrokerRecord,
    /// `kafka-cluster unregister`): the records before it in the same commit took it
    /// out of every ISR it could leave and every leadership. Replica lists still name
    /// it, as in Kafka, until a reassignment moves them. A process of it that starts
    /// again registers anew.
    UnregisterBroker {
        node_id: i32,
    },
    /// A feature's finalized level (Kafka's FeatureLevelRecord, `kafka-features`): from
    /// now on the cluster runs feature `name` at `level` (0: not at all).
    FeatureLevel {
        name: String,
        level: i16,
    },
}

impl MetadataRecord {
    /// The record format ([`METADATA_FORMAT`]) a node must read to apply this record.
    pub fn format_level(&self) -> u16 {
        match self {
            MetadataRecord::UnregisterBroker { .. } => 1,
            MetadataRecord::FeatureLevel { .. } => FEATURE_LEVELS,
            MetadataRecord::Partition { isr, eligible_leader_replicas, last_known_elr, .. }
                if isr.is_empty() || !eligible_leader_replicas.is_empty() || !last_known_elr.is_empty() =>
            {
                ELIGIBLE_LEADER_REPLICAS
            }
            _ => 0,
        }
    }
}

fn is_zero(n: &u16) -> bool {
    *n == 0
}

#[cfg(test)]
impl MetadataRecord {
    /// Broker `node_id`'s registration at a placeholder address, by a process that reads
    /// records up to `metadata_format`.
    pub(crate) fn test_registration(node_id: i32, metadata_format: u16) -> MetadataRecord {
        MetadataRecord::RegisterBroker {
            node_id,
            host: "h".into(),
            port: 9092,
            rack: None,
            inter_broker: None,
            incarnation: None,
            metadata_format,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Data dirs written before the inter-broker listener and the registered process
    /// existed hold registrations without them; a registration without them is written
    /// as before.
    #[test]
    fn a_registration_without_an_inter_broker_listener_keeps_its_old_form() {
        let old = r#"{"type":"RegisterBroker","node_id":1,"host":"h","port":9092,"rack":null}"#;
        let record: MetadataRecord = serde_json::from_str(old).unwrap();
        let expected = MetadataRecord::RegisterBroker {
            node_id: 1,
            host: "h".into(),
            port: 9092,
            rack: None,
            inter_broker: None,
            incarnation: None,
            metadata_format: 0,
        };
        assert_eq!(record, expected);
        assert_eq!(serde_json::to_string(&record).unwrap(), old);
        let with = MetadataRecord::RegisterBroker {
            node_id: 1,
            host: "h".into(),
            port: 9092,
            rack: None,
            inter_broker: Some(Endpoint { host: "runnel-1".into(), port: 9094 }),
            incarnation: Some(Uuid::from_u128(7)),
            metadata_format: METADATA_FORMAT,
        };
        let json = serde_json::to_string(&with).unwrap();
        assert!(json.contains(r#""inter_broker":{"host":"runnel-1","port":9094}"#), "{json}");
        assert!(json.contains(&format!(r#""metadata_format":{METADATA_FORMAT}"#)), "{json}");
        assert_eq!(serde_json::from_str::<MetadataRecord>(&json).unwrap(), with);
    }

    /// A field added to a record in a later release is skipped by a node that does not
    /// know it (so a release can read registrations that declare a newer format), while a
    /// record type it does not know stops it: the reason new record types wait for
    /// [`METADATA_FORMAT`].
    #[test]
    fn an_unknown_field_is_skipped_and_an_unknown_record_type_is_not() {
        let newer = r#"{"type":"RegisterBroker","node_id":1,"host":"h","port":9092,"rack":null,"from_the_future":[1]}"#;
        assert!(matches!(serde_json::from_str(newer), Ok(MetadataRecord::RegisterBroker { node_id: 1, .. })));
        assert!(serde_json::from_str::<MetadataRecord>(r#"{"type":"FromTheFuture","node_id":1}"#).is_err());
    }

    #[test]
    fn only_the_records_of_a_newer_format_need_it() {
        assert_eq!(MetadataRecord::UnregisterBroker { node_id: 1 }.format_level(), 1);
        assert_eq!(MetadataRecord::FeatureLevel { name: "x".into(), level: 0 }.format_level(), FEATURE_LEVELS);
        assert_eq!(MetadataRecord::BrokerFenced { node_id: 1, fenced: true }.format_level(), 0);
        assert_eq!(MetadataRecord::BrokerControlledShutdown { node_id: 1 }.format_level(), 0);
    }
}
