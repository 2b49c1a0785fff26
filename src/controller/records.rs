//! Metadata records: the events that make up cluster metadata.
//!
//! Like KRaft's `__cluster_metadata`, the metadata of a runnel cluster is an ordered log of
//! these records; the [`MetadataImage`](super::MetadataImage) is what you get by applying
//! them in order. Records are facts that already passed validation: applying one never
//! fails.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum MetadataRecord {
    /// The cluster's identity, written once when the data dir is first formatted.
    Cluster {
        cluster_id: String,
    },
    RegisterBroker {
        node_id: i32,
        host: String,
        port: u16,
        rack: Option<String>,
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
}
