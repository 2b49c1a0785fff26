//! The storage layer's error type.

use std::path::PathBuf;

use thiserror::Error;

use super::batch::BatchError;

/// What went wrong in a partition log.
#[derive(Debug, Error)]
pub enum StorageError {
    #[error("storage I/O failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("offset {offset} is outside the log's range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange { offset: i64, log_start_offset: i64, log_end_offset: i64 },
    #[error(
        "a follower append starts at offset {base_offset}, below {expected_at_least} (log end offset {log_end_offset})"
    )]
    UnexpectedAppendOffset { base_offset: i64, expected_at_least: i64, log_end_offset: i64 },
    #[error("invalid record batch: {0}")]
    Batch(#[from] BatchError),
    #[error("corrupt file {path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
}
