//! Partition leadership, and the one place that owns a write until it is safe.
//!
//! * `replica_manager.rs`: opens and closes local partitions as the metadata image says;
//!   `append_local` + `complete` take a Produce's records from validation to the moment
//!   they meet the request's acks.
//! * `purgatory.rs`: delayed operations keyed by partition (produce waiting for the high
//!   watermark, fetch waiting for bytes), woken per partition, with deadlines.
//! * `partition.rs`: one partition's log, leader epoch and producer state behind one lock;
//!   fsyncs outside it.
//! * `isr.rs`: the pure ISR/high-watermark rule (positions and a clock in; high watermark
//!   and ISR-change proposals out). On one node the ISR is this broker.
//! * `partition_config.rs`: a topic's configs, typed once per image.
//! * `validated.rs`, `blocking_pool.rs`, `producer_state.rs`: batch contents checks, the
//!   pool for CPU-heavy work, idempotent-producer sequences.
//!
//! Where the follower fetcher will live: beside `replica_manager.rs`, calling
//! `ReplicaManager::follower_fetched` on the leader side's Fetch path.

pub mod blocking_pool;
pub mod fetcher;
pub mod fetcher_manager;
pub mod isr;
pub mod isr_sink;
pub mod leader_endpoint;
pub mod partition;
pub mod partition_config;
pub mod producer_state;
pub mod purgatory;
pub mod replica_fetch;
pub mod replica_manager;
pub mod validated;

pub use blocking_pool::{BlockingPool, PoolError};
pub use fetcher_manager::FetcherManager;
pub use isr_sink::{IsrChange, IsrChangeSink, LoggingIsrChangeSink};
pub use leader_endpoint::{EndpointError, EndpointFuture, LeaderEndpoint, LeaderEndpoints};
pub use partition::{AppendResult, FetchResult, FollowerFetchState, Partition, PartitionError, ReplicaRead, Role};
pub use partition_config::PartitionConfig;
pub use purgatory::{DelayedOperations, PartitionKey, WaitOutcome};
pub use replica_fetch::{
    FetchedData, FetchedPartition, PartitionFetch, ReplicaFetchError, ReplicaFetchRequest, ReplicaPartitionRead,
};
pub use replica_manager::{Acks, ReplicaManager};
pub use validated::{FramedRecords, ProduceLimits, ValidatedRecords};

#[cfg(test)]
mod cluster_tests;
