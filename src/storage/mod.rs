//! Kafka's on-disk log layout: per partition, segments of v2 record batches with sparse
//! offset and time indexes, crash recovery, retention. Synchronous `std::fs` only; the
//! replica manager decides where each call runs (its module comment says which run on
//! the async workers and why).
//!
//! # Layout
//!
//! * [`log`]: [`PartitionLog`], the entry point: offsets, appends, reads, recovery on open,
//!   flush policy, retention, DeleteRecords, truncation, timestamp and epoch lookups.
//! * [`log_dirs`]: [`log_dirs::LogDirs`], the broker's log directories (`log.dirs`):
//!   which holds each partition, where a new one goes, a move's copy and its crash rules.
//! * [`segment`]: [`segment::LogSegment`], one `.log` file with its indexes.
//! * [`file_cache`]: [`FileCache`], the broker's bounded set of open `.log` descriptors.
//! * [`file_slice`]: a read planned under the partition's lock and carried out after it
//!   ([`LogSlices`]: byte ranges of segment files, copied or sent from the page cache).
//! * [`offset_index`], [`time_index`]: the sparse `.index` and `.timeindex` files.
//! * [`batch`]: the v2 record batch header, Produce-time validation, in-place stamping.
//! * [`record`]: walking the records of an uncompressed batch.
//! * [`leader_epoch`]: the `leader-epoch-checkpoint` cache for OffsetForLeaderEpoch.
//! * [`checkpoint`]: atomically replaced checkpoint files.
//! * [`clean_shutdown`]: the broker's marker of a clean stop.
//! * [`meta_properties`]: the data dir's identity (node id, directory id, cluster id).
//! * [`error`]: the [`StorageError`] enum.

pub mod batch;
pub mod checkpoint;
pub mod clean_shutdown;
pub mod codec;
pub mod error;
pub mod file_cache;
pub mod file_slice;
mod index_file;
pub mod leader_epoch;
pub mod log;
pub mod log_dirs;
pub mod meta_properties;
pub mod offset_index;
pub mod record;
pub mod record_validation;
pub mod segment;
pub mod time_index;

#[cfg(test)]
pub(crate) mod test_util;

pub use batch::{
    set_base_offset, set_log_append_time, set_partition_leader_epoch, validate_batches, BatchError, BatchHeader,
    BATCH_HEADER_LEN,
};
pub use error::{fsync_failed, is_resource_shortage, StorageError};
pub use file_cache::FileCache;
pub use file_slice::{FileSlice, LogSlices};
pub use log::{AppendInfo, CleanStats, LogConfig, PartitionLog, PreparedClean};
pub use record_validation::{needs_decompression, validate_produce_batch, TimestampBounds};
