//! Opening a partition log: directory cleanup, segment loading, crash recovery.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::Path;
use std::sync::Arc;

use super::{
    LogConfig, PartitionLog, CLEANER_OFFSET_CHECKPOINT, CLEAN_SHUTDOWN_MARKER, LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
};
use crate::storage::checkpoint::{sync_dir, CheckpointFile};
use crate::storage::error::StorageError;
use crate::storage::file_cache::FileCache;
use crate::storage::leader_epoch::LeaderEpochCache;
use crate::storage::segment::{
    delete_segment_files, segment_file_name, LogSegment, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX,
};

/// Leftovers of interrupted deletes, compactions and checkpoint writes.
const STRAY_SUFFIXES: [&str; 4] = [".deleted", ".cleaned", ".swap", ".tmp"];

impl PartitionLog {
    /// Opens (creating if missing) the partition log in `dir`.
    ///
    /// After an unclean shutdown every segment from the one holding the persisted recovery
    /// point onward is scanned batch by batch; the first bad or torn batch, everything
    /// after it and all later segments are removed. Missing or inconsistent indexes are
    /// rebuilt in any case.
    ///
    /// The log gets a small file cache of its own; a broker opens its partitions with
    /// [`PartitionLog::open_with_files`] so that they share one.
    pub fn open(dir: &Path, config: LogConfig, now_ms: i64) -> Result<PartitionLog, StorageError> {
        Self::open_with_files(dir, config, now_ms, FileCache::private())
    }

    /// [`PartitionLog::open`], with the segments' `.log` files opened through `files`.
    pub fn open_with_files(
        dir: &Path,
        config: LogConfig,
        now_ms: i64,
        files: Arc<FileCache>,
    ) -> Result<PartitionLog, StorageError> {
        fs::create_dir_all(dir)?;
        super::cleaner::recover_interrupted_clean(dir)?;
        let bases = clean_directory(dir)?;
        let marker = dir.join(CLEAN_SHUTDOWN_MARKER);
        let clean_shutdown = marker.exists();
        if clean_shutdown {
            // Removed while running: a crash from here on must trigger recovery.
            fs::remove_file(&marker)?;
            sync_dir(dir)?;
        }
        let persisted_recovery_point = CheckpointFile::read_offset(&dir.join(RECOVERY_POINT_CHECKPOINT))?.unwrap_or(0);
        let checkpointed_start = CheckpointFile::read_offset(&dir.join(LOG_START_OFFSET_CHECKPOINT))?;

        let mut segments: Vec<LogSegment> = Vec::with_capacity(bases.len());
        for (i, &base) in bases.iter().enumerate() {
            let holds_unflushed = bases.get(i + 1).is_none_or(|&next| next > persisted_recovery_point);
            let recover = !clean_shutdown && holds_unflushed;
            let (segment, cut) = LogSegment::open(dir, base, config.index_interval_bytes, recover, &files)?;
            if let Some(prev) = segments.last() {
                if base < prev.next_offset() {
                    return Err(StorageError::Corrupt {
                        path: dir.join(segment_file_name(base, LOG_SUFFIX)),
                        reason: format!("segment overlaps the previous one, which ends at {}", prev.next_offset()),
                    });
                }
            }
            segments.push(segment);
            if cut > 0 && i + 1 < bases.len() {
                for &later in &bases[i + 1..] {
                    tracing::warn!(dir = %dir.display(), base_offset = later, "deleting segment after a truncated one");
                    delete_segment_files(dir, later)?;
                }
                break;
            }
        }

        let epochs = LeaderEpochCache::load(dir)?;
        let mut log = PartitionLog {
            dir: dir.to_owned(),
            config,
            segments,
            log_start_offset: 0,
            recovery_point: 0,
            unflushed_messages: 0,
            last_flush_ms: now_ms,
            epochs,
            first_dirty_offset: 0,
            uncleanable: false,
            cleaner_map_bytes: super::cleaner::MAX_MAP_BYTES,
            files,
            checkpointed_recovery_point: persisted_recovery_point,
            truncations: 0,
        };
        if log.segments.is_empty() {
            let base = checkpointed_start.unwrap_or(0).max(0);
            log.segments.push(LogSegment::create(dir, base, log.config.index_interval_bytes, &log.files)?);
            sync_dir(dir)?;
        }
        let first_base = log.segments[0].base_offset();
        log.log_start_offset = checkpointed_start.map_or(first_base, |s| s.max(first_base));
        let log_end_offset = log.log_end_offset();
        if log.log_start_offset > log_end_offset {
            tracing::warn!(
                dir = %dir.display(),
                log_start_offset = log.log_start_offset,
                log_end_offset,
                "log start offset is beyond the recovered log end; starting empty there"
            );
            log.truncate_fully_and_start_at(log.log_start_offset)?;
        }
        log.delete_segments_below_start()?;
        let log_end_offset = log.log_end_offset();
        // Never beyond the recovered end: data written there later is dirty.
        let cleaned_to = CheckpointFile::read_offset(&dir.join(CLEANER_OFFSET_CHECKPOINT))?.unwrap_or(0);
        log.first_dirty_offset = cleaned_to.clamp(0, log_end_offset);
        log.epochs.truncate_from_end(log_end_offset)?;
        log.epochs.truncate_from_start(log.log_start_offset)?;
        log.recovery_point = if clean_shutdown {
            log_end_offset
        } else {
            persisted_recovery_point.clamp(log.segments[0].base_offset(), log_end_offset)
        };
        if log.recovery_point < log_end_offset {
            // The recovered tail may be only in the page cache; make it durable so that
            // later fsyncs of just the active segment cover everything.
            log.flush_at(now_ms)?;
        }
        Ok(log)
    }
}

/// Deletes stray files and indexes without a log; returns the segments' base offsets in
/// ascending order.
fn clean_directory(dir: &Path) -> io::Result<Vec<i64>> {
    let mut logs = BTreeSet::new();
    let mut indexes = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !entry.file_type()?.is_file() {
            continue;
        }
        if STRAY_SUFFIXES.iter().any(|s| name.ends_with(s)) {
            tracing::warn!(file = %entry.path().display(), "deleting stray file");
            fs::remove_file(entry.path())?;
            continue;
        }
        let Some((stem, suffix)) = name.split_once('.') else {
            continue;
        };
        let Some(base) = parse_base_offset(stem) else {
            continue;
        };
        match suffix {
            LOG_SUFFIX => {
                logs.insert(base);
            }
            INDEX_SUFFIX | TIME_INDEX_SUFFIX => indexes.push((base, entry.path())),
            _ => {}
        }
    }
    for (base, path) in indexes {
        if !logs.contains(&base) {
            tracing::warn!(file = %path.display(), "deleting index without a log segment");
            fs::remove_file(path)?;
        }
    }
    Ok(logs.into_iter().collect())
}

fn parse_base_offset(stem: &str) -> Option<i64> {
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}
