//! Cluster metadata: records, the image they build, and the controller that validates
//! changes and appends them to the metadata log.
//!
//! Single-node runnel runs this with one voter: the controller's decisions are appended to
//! a local, fsynced metadata log. The Raft quorum (later) replicates that same log.

pub mod delta;
pub mod image;
pub mod metadata_log;
mod quorum;
pub mod raft;
pub mod records;
pub mod topic_config;

pub use delta::{MetadataDelta, MetadataListener};
pub use image::{BrokerImage, MetadataImage, PartitionImage, TopicImage};
pub use quorum::{ConfigChange, Controller, NewTopic};
pub use records::MetadataRecord;

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
    /// A broker could not act on the change (its partitions' files cannot be opened);
    /// nothing was committed.
    #[error("{0}")]
    Storage(String),
    #[error("metadata log I/O failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("internal error: {0}")]
    Internal(String),
}
