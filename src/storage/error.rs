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

/// Whether an I/O error says the process ran short of a resource (descriptors: EMFILE,
/// ENFILE; kernel memory: ENOMEM) rather than that the disk failed. A shortage passes when
/// descriptors are closed or memory is freed, and says nothing about the files: the
/// operation failed before it touched them (an open, a mapping), so the log directory
/// stays online and the request is answered with an error the client retries. Taking
/// the directory offline for it turned a burst of connections or a fetch of thousands of
/// partitions into an outage until restart.
pub fn is_resource_shortage(e: &std::io::Error) -> bool {
    const ENOMEM: i32 = 12;
    const ENFILE: i32 = 23;
    const EMFILE: i32 = 24;
    matches!(e.raw_os_error(), Some(ENOMEM | ENFILE | EMFILE))
}

/// An fsync of log data failed. After a failed writeback the kernel may have dropped the
/// pages it could not write (marking them clean), so what a later read returns is not
/// known to be on disk: the directory must not come back without a restart, whatever
/// the errno. The errno is kept out of `raw_os_error` for that reason (an fsync that
/// says ENOSPC is not a full disk that frees up), and the message keeps it.
#[derive(Debug, Error)]
#[error("fsync failed: {0}")]
pub struct FsyncFailed(std::io::Error);

/// `e`, from an fsync of log data, as an error no log dir recovers from by itself.
pub fn fsync_failed(e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), FsyncFailed(e))
}

#[cfg(test)]
mod tests {
    use super::is_resource_shortage;

    #[test]
    fn descriptor_and_memory_shortages_are_not_disk_failures() {
        for code in [12, 23, 24] {
            assert!(is_resource_shortage(&std::io::Error::from_raw_os_error(code)), "{code}");
        }
        // ENOSPC, EIO, EROFS: the disk's.
        for code in [28, 5, 30] {
            assert!(!is_resource_shortage(&std::io::Error::from_raw_os_error(code)), "{code}");
        }
        assert!(!is_resource_shortage(&std::io::Error::other("no os error")));
        // An fsync's ENOSPC keeps its message but no errno.
        let fsync = super::fsync_failed(std::io::Error::from_raw_os_error(28));
        assert_eq!(fsync.raw_os_error(), None);
        assert!(fsync.to_string().contains("fsync failed"), "{fsync}");
    }
}
