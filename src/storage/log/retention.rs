//! Removing data from a partition log: retention, DeleteRecords, truncation.

use super::{PartitionLog, CLEANER_OFFSET_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT};
use crate::storage::checkpoint::{sync_dir, CheckpointFile};
use crate::storage::error::StorageError;
use crate::storage::segment::LogSegment;

impl PartitionLog {
    /// DeleteRecords: moves the log start offset up to `offset` (never down) and deletes
    /// sealed segments entirely below it. Returns the new log start offset (the low
    /// watermark). The start offset is persisted before any file is removed.
    pub fn delete_records_before(&mut self, offset: i64) -> Result<i64, StorageError> {
        if offset < 0 || offset > self.log_end_offset() {
            return Err(self.out_of_range(offset));
        }
        if offset > self.log_start_offset {
            self.set_log_start_offset(offset)?;
            self.delete_segments_below_start()?;
        }
        Ok(self.log_start_offset)
    }

    /// Deletes sealed segments (never the active one), oldest first: those whose newest
    /// record is older than `retention.ms`, then as many more as can go while the log stays
    /// at least `retention.bytes` large (Kafka's rule). Returns the number deleted.
    /// Only for `cleanup.policy=delete`: a compacted-only log keeps its segments.
    pub fn enforce_retention(&mut self, now_ms: i64) -> Result<usize, StorageError> {
        if !self.config.cleanup_delete {
            return Ok(0);
        }
        let sealed = self.segments.len() - 1;
        let mut count = 0;
        if self.config.retention_ms >= 0 {
            while count < sealed
                && now_ms.saturating_sub(self.segments[count].largest_timestamp()?) > self.config.retention_ms
            {
                count += 1;
            }
        }
        if self.config.retention_bytes >= 0 {
            let kept: u64 = self.segments[count..].iter().map(LogSegment::size).sum();
            let mut excess = kept as i64 - self.config.retention_bytes;
            while count < sealed && excess >= self.segments[count].size() as i64 {
                excess -= self.segments[count].size() as i64;
                count += 1;
            }
        }
        if count == 0 {
            return Ok(0);
        }
        let new_start = self.segments[count].base_offset();
        if new_start > self.log_start_offset {
            self.set_log_start_offset(new_start)?;
        }
        self.delete_oldest_segments(count)?;
        tracing::info!(dir = %self.dir.display(), segments = count, log_start_offset = self.log_start_offset, "retention deleted segments");
        Ok(count)
    }

    /// Removes everything at or above `offset`, for a follower diverging from its leader.
    /// The cut falls on a batch boundary: a batch containing `offset` goes entirely.
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), StorageError> {
        if offset >= self.log_end_offset() {
            return Ok(());
        }
        self.truncations += 1;
        if offset <= self.log_start_offset {
            return self.truncate_fully_and_start_at(offset.max(0));
        }
        while self.segments.len() > 1 && self.active().base_offset() >= offset {
            let segment = self.segments.pop().expect("more than one segment");
            segment.delete()?;
        }
        let removed = self.active_mut().truncate_to(offset)?;
        sync_dir(&self.dir)?;
        let log_end_offset = self.log_end_offset();
        tracing::warn!(dir = %self.dir.display(), offset, log_end_offset, bytes = removed, "truncated log");
        self.epochs.truncate_from_end(log_end_offset)?;
        self.lower_first_dirty_offset(log_end_offset)?;
        self.lower_recovery_point(log_end_offset)
    }

    /// Deletes every segment and starts an empty log at `offset`.
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), StorageError> {
        // Old files go first: the new segment may reuse a deleted one's name. Should an
        // I/O error strike here, the log is left without segments and must not be used.
        self.truncations += 1;
        let mut deleted = Ok(());
        for old in std::mem::take(&mut self.segments) {
            deleted = deleted.and(old.delete());
        }
        deleted?;
        self.segments.push(LogSegment::create(&self.dir, offset, self.config.index_interval_bytes, &self.files)?);
        sync_dir(&self.dir)?;
        self.log_start_offset = offset;
        CheckpointFile::write_offset(&self.dir.join(LOG_START_OFFSET_CHECKPOINT), offset)?;
        self.epochs.clear()?;
        self.recovery_point = offset;
        CheckpointFile::write_offset(&self.dir.join(RECOVERY_POINT_CHECKPOINT), offset)?;
        self.unflushed_messages = 0;
        self.lower_first_dirty_offset(offset)?;
        self.first_dirty_offset = offset;
        Ok(())
    }

    /// Data written at or above `offset` after a truncation is new and not yet cleaned; a
    /// stale, higher cleaner checkpoint would make a restart treat it as cleaned.
    fn lower_first_dirty_offset(&mut self, offset: i64) -> Result<(), StorageError> {
        if self.first_dirty_offset > offset {
            self.first_dirty_offset = offset;
            CheckpointFile::write_offset(&self.dir.join(CLEANER_OFFSET_CHECKPOINT), offset)?;
        }
        Ok(())
    }

    fn lower_recovery_point(&mut self, offset: i64) -> Result<(), StorageError> {
        if self.recovery_point > offset {
            // Persist now: a stale, higher checkpoint would let a crash skip scanning data
            // written at those offsets later.
            self.recovery_point = offset;
            CheckpointFile::write_offset(&self.dir.join(RECOVERY_POINT_CHECKPOINT), offset)?;
        }
        Ok(())
    }

    fn set_log_start_offset(&mut self, offset: i64) -> Result<(), StorageError> {
        self.log_start_offset = offset;
        CheckpointFile::write_offset(&self.dir.join(LOG_START_OFFSET_CHECKPOINT), offset)?;
        self.epochs.truncate_from_start(offset)?;
        Ok(())
    }

    /// Deletes sealed segments whose successor starts at or below the log start offset.
    pub(super) fn delete_segments_below_start(&mut self) -> Result<(), StorageError> {
        let count = self.segments[1..].partition_point(|s| s.base_offset() <= self.log_start_offset);
        self.delete_oldest_segments(count)
    }

    fn delete_oldest_segments(&mut self, count: usize) -> Result<(), StorageError> {
        let count = count.min(self.segments.len() - 1);
        if count == 0 {
            return Ok(());
        }
        for segment in self.segments.drain(..count) {
            segment.delete()?;
        }
        sync_dir(&self.dir)?;
        let first_base = self.segments[0].base_offset();
        if first_base > self.log_start_offset {
            self.set_log_start_offset(first_base)?;
        }
        Ok(())
    }
}
