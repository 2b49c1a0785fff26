//! Partition leadership and replication, and the one place that owns a write until it is
//! safe.
//!
//! * `replica_manager.rs`: opens and closes the local partitions (those the image lists
//!   this broker as a replica of) and gives each its role: leader when the image names
//!   this broker, follower otherwise; `append_local` + `complete` take a Produce's records
//!   from validation to the moment they meet the request's acks.
//! * `purgatory.rs`: delayed operations keyed by partition (produce waiting for the high
//!   watermark, fetch waiting for bytes), woken per partition, with deadlines.
//! * `partition.rs`: one partition's log, role, leader epoch and producer state behind
//!   one lock; fsyncs outside it. `partition/replica.rs`: its replication: the leader's
//!   side of a follower's fetch, the follower's append, truncation and high watermark.
//! * `isr.rs`: the pure ISR/high-watermark rule (positions and a clock in; high watermark
//!   and ISR-change proposals out); `isr_sink.rs`: where proposals go (the controller's
//!   AlterPartition, later; a log line now).
//! * `replica_fetch.rs`: a follower's Fetch in domain terms, and the leader's answer to it
//!   (`ReplicaManager::fetch_for_replica`, long-polling like a consumer fetch).
//! * `fetcher.rs`, `fetcher_manager.rs`: the follower fetchers, one per leader broker,
//!   reaching the leader through `leader_endpoint.rs`'s `LeaderEndpoint` (implemented over
//!   TCP in `protocol/replica_client.rs`; in process in the tests).
//! * `replica_selector.rs`: KIP-392's choice of the replica a consumer reads from.
//! * `replication_quota.rs`: the leader's and the follower's replication throttles
//!   (KIP-73), which hold back catching-up replicas of throttled partitions.
//! * `partition_config.rs`: a topic's configs, typed once per image.
//! * `validated.rs`, `blocking_pool.rs`, `producer_state.rs`: batch contents checks, the
//!   pool for CPU-heavy work, idempotent-producer sequences.

pub mod blocking_pool;
pub mod fetcher;
pub mod fetcher_manager;
pub mod isr;
pub mod isr_sink;
pub mod leader_endpoint;
pub mod leadership_counters;
pub mod partition;
pub mod partition_config;
pub mod producer_state;
pub mod purgatory;
pub mod replica_fetch;
pub mod replica_manager;
pub mod replica_selector;
pub mod replication_quota;
pub mod validated;

pub use blocking_pool::{BlockingPool, PoolError};
pub use fetcher_manager::FetcherManager;
pub use isr_sink::{IsrChange, IsrChangeSink, LoggingIsrChangeSink};
pub use leader_endpoint::{EndpointError, EndpointFuture, LeaderEndpoint, LeaderEndpoints};
pub use partition::{AppendResult, FetchResult, FollowerFetchState, Partition, PartitionError, ReplicaRead, Role};
pub use partition_config::PartitionConfig;
pub use producer_state::ActiveProducer;
pub use purgatory::{DelayedOperations, PartitionKey, WaitOutcome};
pub use replica_fetch::{
    FetchedData, FetchedPartition, PartitionFetch, ReplicaFetchError, ReplicaFetchRequest, ReplicaPartitionRead,
};
pub use replica_manager::{Acks, ReplicaManager};
pub use validated::{FramedRecords, ProduceLimits, ValidatedRecords};

#[cfg(test)]
mod cluster_tests;
#[cfg(test)]
mod replication_simulation;
