//! The controller quorum on openraft: the metadata log replicated by Raft.
//!
//! * [`log_store`]: the Raft log and the vote on disk (fsynced before openraft hears of
//!   them).
//! * [`state_machine`]: the [`MetadataImage`](super::MetadataImage) as Raft's state
//!   machine; its snapshot is the list of records that rebuilds it.
//! * [`wire`]: the messages controllers exchange and their framing.
//! * [`network`]: the client side (openraft's `RaftNetworkFactory`, plus forwarding an
//!   operation to the leader).
//! * [`rpc_server`]: the controller listener that answers them.
//!
//! One log entry is one controller commit: the records of one operation, applied
//! together (and told to listeners together), in log order.

pub mod log_store;
pub mod network;
pub mod rpc_server;
pub mod state_machine;
pub mod wire;

use std::io::Cursor;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::records::MetadataRecord;
/// Raft's files (the vote, the log, snapshots) are replaced as checkpoints are.
pub(crate) use crate::storage::checkpoint::replace_file;

pub type NodeId = u64;

/// The payload of one Raft log entry: the records one controller operation committed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Commit {
    pub records: Vec<MetadataRecord>,
}

/// A member of the controller quorum, as Raft's membership names it: its controller
/// listener address and, when known, the id of the directory that holds its metadata log
/// (with the node id, KIP-853's voter key). Voters that `--controller-quorum-voters`
/// named when the quorum formed have none, as Kafka's static voters have none; a node that
/// joins as a learner, and so a voter added with AddRaftVoter, has its own. Without a
/// directory id this is the `{"addr": ...}` of openraft's `BasicNode`, which it replaced:
/// logs and snapshots written before read unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerNode {
    pub addr: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory_id: Option<Uuid>,
}

impl ControllerNode {
    pub fn new(addr: impl Into<String>, directory_id: Option<Uuid>) -> ControllerNode {
        ControllerNode { addr: addr.into(), directory_id }
    }
}

openraft::declare_raft_types!(
    /// runnel's controller quorum types: entries carry a [`Commit`]; nodes are known by
    /// their controller listener address (and directory id).
    pub TypeConfig:
        D = Commit,
        R = (),
        Node = ControllerNode,
);

pub type Raft = openraft::Raft<TypeConfig>;
pub type StorageError = openraft::StorageError<NodeId>;

/// `std::io::Error` (and friends) into openraft's storage error for `what`.
pub(crate) fn io_err(e: impl std::error::Error + 'static) -> StorageError {
    openraft::StorageIOError::write(&e).into()
}

pub(crate) fn read_err(e: impl std::error::Error + 'static) -> StorageError {
    openraft::StorageIOError::read(&e).into()
}
