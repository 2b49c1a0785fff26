//! Partition leadership: the log end offset, high watermark and leader epoch of each
//! partition this broker hosts, and idempotent-producer state. One node today: the ISR
//! is this broker; followers and the fetcher come with replication.

pub mod partition;
pub mod producer_state;
pub mod replica_manager;

pub use partition::{AppendResult, FetchResult, Partition, PartitionError, ProduceLimits};
pub use replica_manager::ReplicaManager;
