//! Moving a partition to another log directory while it serves (AlterReplicaLogDirs).
//!
//! Kafka copies into a `-future` log and swaps it in once caught up; runnel does the same
//! with files. Copy passes run without the partition's lock, each bringing the
//! `<name>-future` directory up to the live one (new tails of append-only files, whole
//! copies of replaced ones), until a pass copies little. Then, under the lock (produce
//! and fetch of this partition wait only for this step): flush, a last pass, fsync of
//! the copy, and the commit renames of `storage::log_dirs` (source to `-delete`, future to
//! its plain name), and the log is reopened from its new place. Producer state, leader
//! epoch, ISR and high watermark stay in memory, untouched. A crash at any point leaves
//! either the source as the partition (the next start moves it again) or a complete,
//! fsynced copy that start finishes moving.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Partition, PartitionError};
use crate::storage::checkpoint::sync_dir;
use crate::storage::log_dirs::{sync_all_files, DirCopy, DELETE_SUFFIX, FUTURE_SUFFIX};
use crate::storage::{FileCache, PartitionLog, StorageError};

/// What a move's `pace` answers when the broker is stopping: the move stops and its
/// `-future` copy stays, for the next start to take up again (`storage::log_dirs`).
#[derive(Debug)]
pub struct MovePaused;

impl std::fmt::Display for MovePaused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("move paused: the broker is stopping; it resumes at the next start")
    }
}

impl std::error::Error for MovePaused {}

impl MovePaused {
    pub fn error() -> std::io::Error {
        std::io::Error::other(MovePaused)
    }

    fn is(e: &std::io::Error) -> bool {
        e.get_ref().is_some_and(|inner| inner.is::<MovePaused>())
    }

    /// Whether a move ended with this pause (not a failure).
    pub fn ended(e: &PartitionError) -> bool {
        matches!(e, PartitionError::Storage(StorageError::Io(io)) if MovePaused::is(io))
    }
}

/// Copy passes without the lock stop once one copies less than this…
const CATCH_UP_BYTES: u64 = 1 << 20;
/// …or after this many passes (a partition written faster than it can be copied is
/// finished under the lock).
const MAX_PASSES: usize = 20;

impl Partition {
    /// Moves the partition's directory into `dest_root` (a log directory), returning
    /// the new directory. Blocking file I/O: run it on a blocking thread. A partition
    /// deleted meanwhile is not moved (its future copy is removed).
    ///
    /// `pace` hears of each chunk the passes without the lock copy, and may hold the copy
    /// there (`replica.alter.log.dirs.io.max.bytes.per.second`) or abandon the move with an
    /// error ([`MovePaused`]: keeping the copy made so far). The last pass, under the
    /// lock, is not paced: produce and fetch wait for it.
    pub fn move_to(
        &self,
        dest_root: &Path,
        now_ms: i64,
        files: &Arc<FileCache>,
        pace: &mut dyn FnMut(u64) -> std::io::Result<()>,
    ) -> Result<PathBuf, PartitionError> {
        let (src, truncations) = {
            let s = self.lock();
            if s.deleted {
                return Err(PartitionError::NotLeaderOrFollower);
            }
            (s.log.dir().to_owned(), s.log.truncations())
        };
        let io = |e: std::io::Error| PartitionError::Storage(StorageError::Io(e));
        let (Some(src_root), Some(name)) = (src.parent(), src.file_name()) else {
            return Err(io(std::io::Error::other("a partition directory has a parent and a name")));
        };
        if src_root == dest_root {
            return Ok(src);
        }
        let name = name.to_string_lossy().into_owned();
        let future = dest_root.join(format!("{name}{FUTURE_SUFFIX}"));
        let target = dest_root.join(&name);
        let old = src_root.join(format!("{name}{DELETE_SUFFIX}"));
        let discard_future = |e: PartitionError| {
            if let Err(rm) = std::fs::remove_dir_all(&future) {
                if rm.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(dir = %future.display(), error = %rm, "cannot remove an abandoned partition copy");
                }
            }
            e
        };
        if future.exists() {
            std::fs::remove_dir_all(&future).map_err(io)?;
        }
        let mut copy = DirCopy::default();
        for _ in 0..MAX_PASSES {
            let copied = match copy.sync(&src, &future, pace) {
                Ok(copied) => copied,
                Err(e) if MovePaused::is(&e) => return Err(io(e)),
                Err(e) => return Err(discard_future(io(e))),
            };
            if copied < CATCH_UP_BYTES {
                break;
            }
        }
        let mut s = self.lock();
        if s.deleted || s.log.dir() != src {
            drop(s);
            return Err(discard_future(PartitionError::NotLeaderOrFollower));
        }
        let finish = (|| -> Result<(), PartitionError> {
            s.log.flush()?;
            if s.log.truncations() != truncations {
                copy.reset();
            }
            copy.sync(&src, &future, &mut |_| Ok(())).map_err(io)?;
            sync_all_files(&future).map_err(io)?;
            sync_dir(dest_root).map_err(io)?;
            Ok(())
        })();
        if let Err(e) = finish {
            drop(s);
            return Err(discard_future(e));
        }
        // The commit point: once the source is `-delete`, the future copy is the partition.
        std::fs::rename(&src, &old).and_then(|()| sync_dir(src_root)).map_err(io).map_err(discard_future)?;
        let renamed = std::fs::rename(&future, &target).and_then(|()| sync_dir(dest_root));
        let opened = renamed.map_err(io).and_then(|()| {
            Ok(PartitionLog::open_with_files(&target, s.config.log.clone(), now_ms, Arc::clone(files))?)
        });
        let log = match opened {
            Ok(log) => log,
            Err(e) => {
                // Undo, so the source is the partition again.
                let _ = std::fs::rename(&target, &future);
                if let Err(back) = std::fs::rename(&old, &src) {
                    tracing::error!(dir = %old.display(), error = %back, "cannot restore a partition after a failed move");
                }
                drop(s);
                return Err(discard_future(e));
            }
        };
        let source_log = std::mem::replace(&mut s.log, log);
        s.moves += 1;
        drop(s);
        drop(source_log);
        if let Err(e) = std::fs::remove_dir_all(&old) {
            tracing::warn!(dir = %old.display(), error = %e, "cannot remove a moved partition's old copy; removed at the next start");
        }
        Ok(target)
    }
}
