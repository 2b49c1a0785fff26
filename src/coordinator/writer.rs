//! Where the coordinator's records go: `__consumer_offsets`, behind a trait so the shell
//! can be driven by a test writer that fails or holds an append (Kafka's
//! `PartitionWriter`).

use std::future::Future;
use std::pin::Pin;

use thiserror::Error;

use super::offsets_codec::OffsetsRecord;

/// Why an append to `__consumer_offsets` did not happen. The writer logs the details; the
/// kind is what decides the Kafka error the members get (see `protocol::errors`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum OffsetsWriteError {
    /// The topic or its partition is not there to write to (Kafka's
    /// UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT).
    #[error("__consumer_offsets is not available for writing")]
    Unavailable,
    /// The partition's log failed the write (Kafka's KAFKA_STORAGE_ERROR).
    #[error("__consumer_offsets could not be written to disk")]
    Storage,
    /// The log refused the batch: too large or malformed (Kafka's MESSAGE_TOO_LARGE,
    /// RECORD_LIST_TOO_LARGE).
    #[error("__consumer_offsets refused the coordinator's records")]
    Rejected,
    /// This broker does not lead the group's `__consumer_offsets` partition (any more):
    /// the group is another broker's, and the client finds its coordinator again
    /// (NOT_COORDINATOR).
    #[error("this broker is not the coordinator")]
    NotCoordinator,
}

pub type AppendFuture<'a> = Pin<Box<dyn Future<Output = Result<(), OffsetsWriteError>> + Send + 'a>>;

/// Appends one decision's records as one batch to `partition` of `__consumer_offsets`.
/// When the future resolves `Ok`, the records are in the log as durably as the broker's
/// flush policy promises; on `Err` none are.
pub trait OffsetsWriter: Send + Sync {
    fn append<'a>(&'a self, partition: i32, records: &'a [OffsetsRecord]) -> AppendFuture<'a>;
}
