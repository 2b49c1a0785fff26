//! [`PartitionLog`]: one partition's log, the storage layer's entry point.
//!
//! Durability: an append is in the page cache when `append` returns; it survives a process
//! crash then, but a power loss only after an fsync. fsyncs happen when `flush.messages`
//! records or `flush.ms` have accumulated since the last one (Kafka's policy; both default
//! to never), on every segment roll (for the sealed segment), on [`PartitionLog::flush`] and
//! [`PartitionLog::close`], and through [`PartitionLog::unflushed_handle`] for callers that
//! group-commit before acknowledging. On restart, everything at or above the persisted
//! recovery point is scanned and a torn or corrupt tail is cut off.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::batch::{set_base_offset, set_partition_leader_epoch, split_batches, BatchHeader, Compression};
use super::checkpoint::{sync_dir, CheckpointFile};
use super::error::StorageError;
use super::file_cache::FileCache;
use super::leader_epoch::LeaderEpochCache;
use super::record::record_positions;
use super::segment::LogSegment;

mod cleaner;
pub use cleaner::{CleanStats, PreparedClean};
mod follower;
mod lookup;
mod read;
mod recovery;
mod retention;
#[cfg(test)]
mod tests;

/// Per-topic log settings, named after Kafka's topic configs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the active segment would grow past this.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the active segment's first append is older than this.
    pub segment_ms: i64,
    /// `index.interval.bytes`: log bytes between offset index entries.
    pub index_interval_bytes: u64,
    /// `retention.ms`: delete sealed segments whose newest record is older; -1 = forever.
    pub retention_ms: i64,
    /// `retention.bytes`: delete oldest sealed segments while the log is larger; -1 = no limit.
    pub retention_bytes: i64,
    /// `flush.messages`: fsync after this many records; `i64::MAX` = never.
    pub flush_messages: i64,
    /// `flush.ms`: fsync when this long has passed since the last fsync; `i64::MAX` = never.
    pub flush_ms: i64,
    /// `max.message.bytes`: largest record batch accepted.
    pub max_message_bytes: usize,
    /// `cleanup.policy` contains `delete`: time and size retention apply.
    pub cleanup_delete: bool,
    /// `cleanup.policy` contains `compact`: the cleaner keeps the newest record per key.
    pub cleanup_compact: bool,
    /// `delete.retention.ms`: how long the cleaner keeps a tombstone (a null value).
    pub delete_retention_ms: i64,
    /// `min.cleanable.dirty.ratio`, in thousandths: clean once this share of the sealed
    /// bytes has not been cleaned yet.
    pub min_cleanable_dirty_permille: u32,
    /// `min.compaction.lag.ms`: segments with records younger than this are not cleaned.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: dirty data older than this is cleaned whatever the ratio.
    pub max_compaction_lag_ms: i64,
}

const WEEK_MS: i64 = 7 * 24 * 3600 * 1000;

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: WEEK_MS,
            index_interval_bytes: 4096,
            retention_ms: WEEK_MS,
            retention_bytes: -1,
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            max_message_bytes: 1_048_588,
            cleanup_delete: true,
            cleanup_compact: false,
            delete_retention_ms: 24 * 3600 * 1000,
            min_cleanable_dirty_permille: 500,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
        }
    }
}

/// Where an append landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    /// Largest batch max timestamp appended (-1 when none carries a timestamp).
    pub max_timestamp: i64,
    /// Offset of the record with `max_timestamp` (the batch's base offset when compressed).
    pub offset_of_max_timestamp: i64,
    pub log_start_offset: i64,
}

pub(crate) const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-checkpoint";
pub(crate) const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
pub(crate) const CLEAN_SHUTDOWN_MARKER: &str = ".kafka_cleanshutdown";
pub(crate) const CLEANER_OFFSET_CHECKPOINT: &str = "cleaner-offset-checkpoint";

/// A partition's log: ordered segments, only the last of which (the active segment) is
/// appended to.
///
/// The partition directory holds:
///
/// ```text
/// <base offset>.log / .index / .timeindex   one LogSegment each (20-digit base offset)
/// recovery-point-checkpoint     offset below which everything was fsynced
/// log-start-offset-checkpoint   log start offset moved by DeleteRecords or retention
/// leader-epoch-checkpoint       LeaderEpochCache
/// cleaner-offset-checkpoint     compacted logs: where the cleaned part ends
/// cleaner.tmp/, cleaner.swap/   the cleaner's output while it works (see `cleaner`)
/// .kafka_cleanshutdown          present only between close() and the next open()
/// ```
///
/// The checkpoints use [`CheckpointFile`]'s format with a single entry.
///
/// Invariants: `segments` is never empty and sorted by base offset; offsets increase
/// across segments; `log_start_offset` ≥ the first segment's base offset and ≤ the log end
/// offset; `recovery_point` ≤ the log end offset and everything below it has been fsynced.
#[derive(Debug)]
pub struct PartitionLog {
    dir: PathBuf,
    config: LogConfig,
    segments: Vec<LogSegment>,
    log_start_offset: i64,
    recovery_point: i64,
    unflushed_messages: i64,
    last_flush_ms: i64,
    epochs: LeaderEpochCache,
    /// Everything below this offset has been through the cleaner (compacted topics).
    first_dirty_offset: i64,
    /// The cleaner gave up on this log (see `finish_clean`); cleared by a restart.
    uncleanable: bool,
    /// Memory the cleaner's key map may take (a constant; tests lower it).
    cleaner_map_bytes: usize,
    /// Where the segments' `.log` descriptors live (shared by the broker's partitions).
    files: Arc<FileCache>,
    /// The recovery point as last written to `recovery-point-checkpoint`.
    checkpointed_recovery_point: i64,
    /// Bumped whenever a file of the log may have been cut back (a truncation, or an
    /// append that failed and was undone): a copy of the directory that only appends the
    /// files' new tails (a partition move) must then copy them whole.
    truncations: u64,
}

impl PartitionLog {
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    pub fn log_end_offset(&self) -> i64 {
        self.active().next_offset()
    }

    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(LogSegment::size).sum()
    }

    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Offset up to which the log is known to be on disk.
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }

    fn active(&self) -> &LogSegment {
        self.segments.last().expect("a partition log always has a segment")
    }

    fn active_mut(&mut self) -> &mut LogSegment {
        self.segments.last_mut().expect("a partition log always has a segment")
    }

    /// Index of the segment that would hold `offset`: the last one with base ≤ `offset`.
    fn segment_index_for(&self, offset: i64) -> usize {
        self.segments.partition_point(|s| s.base_offset() <= offset).saturating_sub(1)
    }

    fn out_of_range(&self, offset: i64) -> StorageError {
        StorageError::OffsetOutOfRange {
            offset,
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset(),
        }
    }

    /// Appends already validated batches, assigning offsets from the log end offset and
    /// stamping `leader_epoch`, both in place in `records`. All or nothing.
    pub fn append(&mut self, records: &mut [u8], leader_epoch: i32, now_ms: i64) -> Result<AppendInfo, StorageError> {
        let result = self.append_inner(records, leader_epoch, now_ms);
        if result.is_err() {
            self.truncations += 1;
        }
        result
    }

    /// How many times a file of the log may have been cut back since it was opened.
    pub fn truncations(&self) -> u64 {
        self.truncations
    }

    /// A log opened again in place of another (its directory came back after a
    /// failure) continues that one's count of truncations (see [`Self::truncations`]).
    pub fn carry_truncations(&mut self, count: u64) {
        self.truncations = self.truncations.max(count);
    }

    fn append_inner(&mut self, records: &mut [u8], leader_epoch: i32, now_ms: i64) -> Result<AppendInfo, StorageError> {
        let mut headers = split_batches(records)?;
        let base_offset = self.log_end_offset();
        let mut next = base_offset;
        let mut pos = 0;
        let mut record_count: i64 = 0;
        for h in &mut headers {
            set_base_offset(&mut records[pos..], next);
            set_partition_leader_epoch(&mut records[pos..], leader_epoch);
            h.base_offset = next;
            h.partition_leader_epoch = leader_epoch;
            next = h.next_offset();
            pos += h.total_len();
            record_count += i64::from(h.records_count.max(0));
        }
        let last_offset = next - 1;
        if self.should_roll(records.len() as u64, last_offset, now_ms) {
            self.roll(now_ms)?;
        }
        self.active_mut().append(records, &headers, now_ms)?;
        if leader_epoch >= 0 && self.epochs.latest_epoch().is_none_or(|e| leader_epoch > e) {
            if let Err(e) = self.epochs.assign(leader_epoch, base_offset) {
                // Keep the append all-or-nothing: the epoch must be known for its data.
                self.active_mut().truncate_to(base_offset)?;
                return Err(e.into());
            }
        }
        self.finish_append(records, &headers, base_offset, last_offset, record_count, now_ms)
    }

    /// The end of every append, a leader's or a follower's: the records count toward the
    /// flush policy (flushing when it says so), and the append is reported.
    fn finish_append(
        &mut self,
        records: &[u8],
        headers: &[BatchHeader],
        base_offset: i64,
        last_offset: i64,
        record_count: i64,
        now_ms: i64,
    ) -> Result<AppendInfo, StorageError> {
        let (max_timestamp, offset_of_max_timestamp) = max_timestamp_of(records, headers);
        self.unflushed_messages = self.unflushed_messages.saturating_add(record_count);
        if self.unflushed_messages >= self.config.flush_messages
            || now_ms.saturating_sub(self.last_flush_ms) >= self.config.flush_ms
        {
            if let Err(e) = self.flush_at(now_ms) {
                // The flush the policy asked for failed after the batches were written:
                // they are cut back, so that the append is all or nothing. A failure the
                // log dir survives (a descriptor shortage) must not leave them in the log
                // for a producer's retry to be appended a second time.
                // A flush that failed at the checkpoint had moved the recovery point past
                // them already: it must not claim the cut-back offsets (nor what is
                // appended there next) are on disk.
                self.truncations += 1;
                self.recovery_point = self.recovery_point.min(base_offset);
                self.active_mut().truncate_to(base_offset)?;
                return Err(e);
            }
        }
        Ok(AppendInfo {
            base_offset,
            last_offset,
            max_timestamp,
            offset_of_max_timestamp,
            log_start_offset: self.log_start_offset,
        })
    }

    fn should_roll(&self, append_bytes: u64, last_offset: i64, now_ms: i64) -> bool {
        let active = self.active();
        if active.is_empty() {
            return false;
        }
        let too_big = active.size() + append_bytes > self.config.segment_bytes
            // Index positions are u32.
            || active.size() + append_bytes > u64::from(u32::MAX);
        let too_old =
            active.created_ms().is_some_and(|created| now_ms.saturating_sub(created) > self.config.segment_ms);
        // Index offsets are relative to the base offset and must fit.
        let offsets_overflow = last_offset - active.base_offset() > i64::from(i32::MAX);
        too_big || too_old || offsets_overflow
    }

    /// Seals the active segment (fsyncing it, so only the new active segment can hold
    /// unflushed data) and starts a new one at the log end offset.
    fn roll(&mut self, now_ms: i64) -> Result<(), StorageError> {
        let base_offset = self.log_end_offset();
        let active = self.active_mut();
        active.seal()?;
        active.flush()?;
        let segment = LogSegment::create(&self.dir, base_offset, self.config.index_interval_bytes, &self.files)?;
        sync_dir(&self.dir)?;
        self.segments.push(segment);
        // Every earlier segment was fsynced when it was sealed.
        self.recovery_point = self.recovery_point.max(base_offset);
        tracing::debug!(dir = %self.dir.display(), base_offset, now_ms, "rolled new segment");
        Ok(())
    }

    /// fdatasyncs everything not yet flushed and persists the recovery point.
    pub fn flush(&mut self) -> Result<(), StorageError> {
        self.flush_at(wall_clock_ms())
    }

    fn flush_at(&mut self, now_ms: i64) -> Result<(), StorageError> {
        let first = self.segment_index_for(self.recovery_point);
        for seg in &mut self.segments[first..] {
            seg.flush()?;
        }
        self.recovery_point = self.log_end_offset();
        // An idle partition costs no I/O here (a shutdown flushes every partition).
        if self.checkpointed_recovery_point != self.recovery_point {
            CheckpointFile::write_offset(&self.dir.join(RECOVERY_POINT_CHECKPOINT), self.recovery_point)?;
            self.checkpointed_recovery_point = self.recovery_point;
        }
        self.unflushed_messages = 0;
        self.last_flush_ms = now_ms;
        Ok(())
    }

    /// For group commit outside the caller's lock: the active segment's file and the log
    /// end offset now. fsyncing that file makes everything below the offset durable (older
    /// segments were fsynced when sealed). `None` when nothing is unflushed.
    pub fn unflushed_handle(&self) -> Result<Option<(Arc<File>, i64)>, StorageError> {
        let log_end_offset = self.log_end_offset();
        if self.recovery_point >= log_end_offset {
            return Ok(None);
        }
        Ok(Some((self.active().log_file()?, log_end_offset)))
    }

    /// Whether [`Self::flush`] has anything to write or fsync.
    pub fn needs_flush(&self) -> bool {
        self.recovery_point < self.log_end_offset()
            || self.checkpointed_recovery_point != self.recovery_point
            || self.segments.iter().any(LogSegment::is_dirty)
    }

    /// Records that a caller fsynced through [`Self::unflushed_handle`] up to `offset`.
    /// The recovery point is kept in memory only; the next [`Self::flush`] persists it.
    pub fn mark_flushed(&mut self, offset: i64) {
        let log_end_offset = self.log_end_offset();
        self.recovery_point = self.recovery_point.max(offset.min(log_end_offset));
        if self.recovery_point == log_end_offset {
            self.unflushed_messages = 0;
            self.active_mut().mark_log_synced();
        }
    }

    /// Flushes and leaves a clean-shutdown marker so the next open skips recovery.
    pub fn close(mut self) -> Result<(), StorageError> {
        self.active_mut().seal()?;
        self.flush()?;
        File::create(self.dir.join(CLEAN_SHUTDOWN_MARKER))?.sync_all()?;
        sync_dir(&self.dir)?;
        Ok(())
    }

    /// Removes the partition directory and everything in it.
    pub fn delete(self) -> Result<(), StorageError> {
        let dir = self.dir.clone();
        drop(self);
        std::fs::remove_dir_all(&dir)?;
        if let Some(parent) = dir.parent() {
            sync_dir(parent)?;
        }
        Ok(())
    }
}

/// Largest batch max timestamp in `records` and the offset of the record carrying it
/// (exact for uncompressed batches, the batch's base offset otherwise).
fn max_timestamp_of(records: &[u8], headers: &[BatchHeader]) -> (i64, i64) {
    let mut best: Option<(usize, &BatchHeader)> = None;
    let mut pos = 0;
    for h in headers {
        if h.max_timestamp >= 0 && best.is_none_or(|(_, b)| h.max_timestamp > b.max_timestamp) {
            best = Some((pos, h));
        }
        pos += h.total_len();
    }
    match best {
        None => (-1, -1),
        Some((pos, h)) => (h.max_timestamp, exact_offset_of_timestamp(&records[pos..pos + h.total_len()], h)),
    }
}

/// Offset of the first record in `batch` whose timestamp is the batch's max timestamp.
pub(crate) fn exact_offset_of_timestamp(batch: &[u8], h: &BatchHeader) -> i64 {
    if h.compression() != Compression::None {
        return h.base_offset;
    }
    record_positions(h, batch)
        .ok()
        .and_then(|recs| recs.into_iter().find(|r| r.timestamp == h.max_timestamp))
        .map_or(h.base_offset, |r| r.offset)
}

fn wall_clock_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
