//! Cluster metadata: records, the image they build, and the controller that validates
//! changes and appends them to the metadata log.
//!
//! The metadata log is replicated by a Raft controller quorum (`raft/`, on openraft);
//! single-node runnel is a quorum of one voter. The quorum leader validates changes
//! (`operations.rs`, placing replicas with `placement.rs`) and commits their records;
//! every node applies them to its image (`quorum.rs`, `raft/state_machine.rs`).
//! `metadata_log.rs` is the pre-Raft single-node log, read once as the base of a data
//! dir written before the quorum.

pub mod broker_config;
pub mod broker_liveness;
pub mod client_metrics;
pub mod cluster_ops;
pub mod delta;
mod eligible_leaders;
pub mod features;
pub mod image;
pub mod metadata_log;
pub mod operations;
pub mod partition_change;
pub mod placement;
mod quorum;
pub mod raft;
pub mod reassignment;
pub mod records;
pub mod topic_config;

pub use delta::{MetadataDelta, MetadataListener};
pub use image::{BrokerImage, Listener, MetadataImage, PartitionImage, TopicImage};
pub use operations::{validate_topic_name, ConfigChange, ControllerOp, NewTopic};
pub use partition_change::{ElectionError, ElectionType};
pub use quorum::{Controller, ControllerConfig, Leadership, QuorumDescription, QuorumReplica, RaftTuning};
pub use reassignment::ReassignmentError;
pub use records::{Endpoint, MetadataRecord};

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ControllerError {
    #[error("Topic '{0}' already exists.")]
    TopicAlreadyExists(String),
    #[error("This server does not host this topic: {0}")]
    UnknownTopic(String),
    #[error("{0}")]
    InvalidTopic(String),
    #[error("{0}")]
    InvalidPartitions(String),
    #[error("{0}")]
    InvalidReplicationFactor(String),
    #[error("{0}")]
    InvalidReplicaAssignment(String),
    #[error("{0}")]
    InvalidConfig(String),
    /// Kafka's InvalidRequestException (INVALID_REQUEST).
    #[error("{0}")]
    InvalidRequest(String),
    /// A broker could not act on the change (its partitions' files cannot be opened);
    /// nothing was committed.
    #[error("{0}")]
    Storage(String),
    /// No controller leader took the change in time, or the answer was lost; it may or
    /// may not have been committed.
    #[error("{0}")]
    NotController(String),
    #[error("metadata log I/O failed: {0}")]
    Io(#[from] std::io::Error),
    /// A broker's heartbeat or AlterPartition the controller turned down (Kafka answers
    /// those with an error code the broker acts on; the message names it).
    #[error("{0}")]
    Refused(String),
    /// An AlterPartition the controller did not apply, said against the partition epoch
    /// the request named, which is the current one (Kafka's INELIGIBLE_REPLICA): no
    /// controller has applied it or will.
    #[error("{0}")]
    NotAttempted(String),
    /// UnregisterBroker named a broker that is not registered (Kafka's
    /// BROKER_ID_NOT_REGISTERED).
    #[error("{0}")]
    BrokerIdNotRegistered(String),
    /// The change needs a metadata record format that some registered broker's
    /// release cannot read ([`records::METADATA_FORMAT`]); nothing was committed
    /// (Kafka's UNSUPPORTED_VERSION, as for a feature the cluster's `metadata.version`
    /// does not have yet).
    #[error("{0}")]
    UnsupportedVersion(String),
    /// AddRaftVoter named a node that is a voter already (Kafka's DUPLICATE_VOTER).
    #[error("{0}")]
    DuplicateVoter(String),
    /// RemoveRaftVoter named no voter of the quorum, or the last one (VOTER_NOT_FOUND).
    #[error("{0}")]
    VoterNotFound(String),
    /// UpdateFeatures asked for a level the cluster may not move to (Kafka's
    /// INVALID_UPDATE_VERSION); nothing was committed.
    #[error("{0}")]
    InvalidUpdateVersion(String),
    #[error("internal error: {0}")]
    Internal(String),
}
