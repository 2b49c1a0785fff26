//! How a follower reaches a leader: the small seam between the fetcher (here) and the
//! wire (`protocol/replica_client.rs`), so the fetcher speaks domain types only and tests
//! can put a leader in the same process.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::replica_fetch::{FetchedPartition, ReplicaFetchRequest};

pub type EndpointFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why a whole fetch failed (a partition's own error is in its [`FetchedPartition`]).
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("no address known for leader {0}")]
    UnknownLeader(i32),
    #[error("connection to the leader failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the leader did not answer within {0:?}")]
    Timeout(std::time::Duration),
    #[error("the leader answered with error code {0}")]
    Response(i16),
    #[error("the leader's answer is malformed: {0}")]
    Protocol(String),
}

/// One leader broker, as a follower sees it.
pub trait LeaderEndpoint: Send + Sync {
    /// Sends one Fetch and returns the answer per partition, in the request's order or
    /// not (the fetcher matches by topic id and partition).
    fn fetch(&self, request: ReplicaFetchRequest) -> EndpointFuture<'_, Result<Vec<FetchedPartition>, EndpointError>>;
}

/// Gives the fetcher of leader `leader` its endpoint (one per fetcher; the endpoint keeps
/// its connection and reconnects as it must).
pub trait LeaderEndpoints: Send + Sync {
    fn endpoint(&self, leader: i32) -> Arc<dyn LeaderEndpoint>;
}
