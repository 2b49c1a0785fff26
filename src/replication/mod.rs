//! Partition leadership: the log end offset, high watermark and leader epoch of each
//! partition this broker hosts, and idempotent-producer state. One node today: the ISR
//! is this broker; followers and the fetcher come with replication.

pub mod blocking_pool;
pub mod isr;
pub mod partition;
pub mod partition_config;
pub mod producer_state;
pub mod purgatory;
pub mod replica_manager;
pub mod validated;

pub use blocking_pool::{BlockingPool, PoolError};
pub use partition::{AppendResult, FetchResult, Partition, PartitionError};
pub use partition_config::PartitionConfig;
pub use purgatory::{DelayedOperations, PartitionKey, WaitOutcome};
pub use replica_manager::{Acks, ReplicaManager};
pub use validated::{FramedRecords, ProduceLimits, ValidatedRecords};
