//! One partition this broker leads: its log, leader epoch, high watermark and producer
//! state, behind one lock that this type owns.
//!
//! Single node: the ISR is this broker alone, so the high watermark advances to the log
//! end offset as soon as an append is in the leader's log (and, in fsync mode, on disk
//! before the producer is answered). Consumers never read past the high watermark.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use thiserror::Error;
use uuid::Uuid;

use super::producer_state::{ProducerStateTable, SequenceCheck};
use super::validated::ValidatedRecords;
use crate::storage::{BatchError, CleanStats, LogConfig, PartitionLog, PreparedClean, StorageError};

#[derive(Debug, Error)]
pub enum PartitionError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    InvalidBatch(#[from] BatchError),
    #[error("out of order sequence number: expected {expected}, got {got}")]
    OutOfOrderSequence { expected: i32, got: i32 },
    #[error("producer epoch {got} is older than the current epoch {current}")]
    InvalidProducerEpoch { current: i16, got: i16 },
    #[error("offset {offset} is beyond the high watermark {high_watermark}")]
    OffsetBeyondHighWatermark { offset: i64, high_watermark: i64 },
    #[error("records of a topic whose cleanup.policy lacks delete cannot be deleted")]
    DeleteNotAllowed,
    #[error(transparent)]
    Pool(#[from] super::blocking_pool::PoolError),
}

#[derive(Debug, Clone, Copy)]
pub struct AppendResult {
    pub base_offset: i64,
    pub last_offset: i64,
    pub log_start_offset: i64,
    /// -1 unless the topic uses LogAppendTime.
    pub log_append_time: i64,
}

#[derive(Debug, Clone)]
pub struct FetchResult {
    pub records: Bytes,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub last_stable_offset: i64,
}

struct PartitionState {
    log: PartitionLog,
    leader_epoch: i32,
    high_watermark: i64,
    producers: ProducerStateTable,
    /// Everything below this offset is known to be on disk.
    flushed_through: i64,
    log_append_time: bool,
    /// The topic was deleted: its directory is going or gone (a topic of the same name
    /// may reuse the path), so no background work may write there any more.
    deleted: bool,
}

/// Which partition: topic name, topic id, partition number.
#[derive(Debug, Clone, Copy)]
pub struct PartitionId<'a> {
    pub topic: &'a str,
    pub topic_id: Uuid,
    pub index: i32,
}

pub struct Partition {
    pub topic: String,
    pub topic_id: Uuid,
    pub index: i32,
    pub dir: PathBuf,
    state: Mutex<PartitionState>,
}

impl Partition {
    pub fn open(
        id: PartitionId<'_>,
        dir: PathBuf,
        config: LogConfig,
        log_append_time: bool,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<Partition, PartitionError> {
        let PartitionId { topic, topic_id, index } = id;
        let log = PartitionLog::open(&dir, config, now_ms)?;
        let headers = log.batch_headers_from(log.log_start_offset())?;
        let producers = ProducerStateTable::rebuild(headers.iter());
        let leo = log.log_end_offset();
        Ok(Partition {
            topic: topic.to_owned(),
            topic_id,
            index,
            dir,
            state: Mutex::new(PartitionState {
                log,
                leader_epoch,
                high_watermark: leo,
                producers,
                flushed_through: leo,
                log_append_time,
                deleted: false,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, PartitionState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set_config(&self, config: LogConfig, log_append_time: bool) {
        let mut s = self.lock();
        s.log.set_config(config);
        s.log_append_time = log_append_time;
    }

    pub fn leader_epoch(&self) -> i32 {
        self.lock().leader_epoch
    }

    /// Append a Produce request's validated records for this partition: all batches or
    /// none. The records are stamped in place (offsets, leader epoch, append time).
    pub fn append(&self, records: &mut ValidatedRecords, now_ms: i64) -> Result<AppendResult, PartitionError> {
        let (headers, records) = records.parts_mut();
        let mut s = self.lock();
        // Sequence checks against a scratch copy so a rejected request changes nothing.
        let mut duplicate = None;
        for h in headers {
            match s.producers.check(h) {
                SequenceCheck::Append => {}
                SequenceCheck::Duplicate(rec) => duplicate = Some(rec),
                SequenceCheck::OutOfOrder { expected, got } => {
                    return Err(PartitionError::OutOfOrderSequence { expected, got })
                }
                SequenceCheck::InvalidEpoch { current, got } => {
                    return Err(PartitionError::InvalidProducerEpoch { current, got })
                }
            }
        }
        if let Some(rec) = duplicate {
            if headers.len() == 1 {
                return Ok(AppendResult {
                    base_offset: rec.base_offset,
                    last_offset: rec.last_offset,
                    log_start_offset: s.log.log_start_offset(),
                    log_append_time: -1,
                });
            }
        }
        let mut log_append_time = -1;
        if s.log_append_time {
            log_append_time = now_ms;
            let mut pos = 0;
            for h in headers {
                let len = h.total_len();
                crate::storage::set_log_append_time(&mut records[pos..pos + len], now_ms);
                pos += len;
            }
        }
        let epoch = s.leader_epoch;
        let info = s.log.append(records, epoch, now_ms)?;
        let mut offset = info.base_offset;
        for h in headers {
            let count = i64::from(h.last_offset_delta) + 1;
            s.producers.record(h, offset, offset + count - 1);
            offset += count;
        }
        // One replica: committed as soon as it is in the leader's log.
        s.high_watermark = s.log.log_end_offset();
        Ok(AppendResult {
            base_offset: info.base_offset,
            last_offset: info.last_offset,
            log_start_offset: info.log_start_offset,
            log_append_time,
        })
    }

    /// fsync everything through `offset` (group commit: one fsync covers every append
    /// made before it started).
    pub fn flush_through(&self, offset: i64) -> Result<(), PartitionError> {
        let mut s = self.lock();
        if s.flushed_through > offset {
            return Ok(());
        }
        let leo = s.log.log_end_offset();
        s.log.flush()?;
        s.flushed_through = s.flushed_through.max(leo);
        Ok(())
    }

    pub fn fetch(&self, offset: i64, max_bytes: usize) -> Result<FetchResult, PartitionError> {
        let s = self.lock();
        let hw = s.high_watermark;
        let records = s.log.read(offset, max_bytes, hw)?;
        Ok(FetchResult {
            records,
            high_watermark: hw,
            log_start_offset: s.log.log_start_offset(),
            last_stable_offset: hw,
        })
    }

    pub fn high_watermark(&self) -> i64 {
        self.lock().high_watermark
    }

    pub fn log_start_offset(&self) -> i64 {
        self.lock().log.log_start_offset()
    }

    pub fn log_end_offset(&self) -> i64 {
        self.lock().log.log_end_offset()
    }

    /// (offset, timestamp) of the first record with timestamp >= `ts`, below the HW.
    pub fn offset_for_timestamp(&self, ts: i64) -> Result<Option<(i64, i64)>, PartitionError> {
        let s = self.lock();
        Ok(s.log.offset_for_timestamp(ts)?.filter(|(o, _)| *o < s.high_watermark))
    }

    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        let s = self.lock();
        s.log.max_timestamp().filter(|(_, o)| *o < s.high_watermark)
    }

    /// DeleteRecords: advance the log start offset. `-1` means the high watermark.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64, PartitionError> {
        let mut s = self.lock();
        // Kafka refuses this for compacted-only topics before looking at the offset.
        if !s.log.config().cleanup_delete {
            return Err(PartitionError::DeleteNotAllowed);
        }
        let hw = s.high_watermark;
        let target = if offset == -1 { hw } else { offset };
        if target < 0 || target > hw {
            return Err(PartitionError::OffsetBeyondHighWatermark { offset: target, high_watermark: hw });
        }
        Ok(s.log.delete_records_before(target)?)
    }

    pub fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        let s = self.lock();
        let leo = s.log.log_end_offset();
        match s.log.end_offset_for_epoch(epoch) {
            Some(found) => Some(found),
            // Nothing appended yet in any epoch: the current epoch ends at the LEO.
            None if s.log.latest_epoch().is_none() && epoch >= s.leader_epoch => Some((s.leader_epoch, leo)),
            None => None,
        }
    }

    pub fn enforce_retention(&self, now_ms: i64) -> Result<usize, PartitionError> {
        Ok(self.lock().log.enforce_retention(now_ms)?)
    }

    /// One log cleaner pass (compacted topics only). The partition is locked only to plan
    /// the pass and to swap the cleaned segments in, not while they are written.
    pub fn clean(&self, now_ms: i64) -> Result<Option<CleanStats>, PartitionError> {
        let Some(prepared) = self.prepare_clean(now_ms)? else { return Ok(None) };
        self.finish_clean(prepared)
    }

    /// Plans under the lock, then writes the cleaned segments without it.
    fn prepare_clean(&self, now_ms: i64) -> Result<Option<PreparedClean>, PartitionError> {
        let plan = {
            let s = self.lock();
            if s.deleted {
                return Ok(None);
            }
            s.log.plan_clean(now_ms)
        };
        let Some(plan) = plan else { return Ok(None) };
        Ok(Some(plan.prepare(now_ms)?))
    }

    /// Swaps the cleaned segments in, unless the topic was deleted meanwhile.
    fn finish_clean(&self, prepared: PreparedClean) -> Result<Option<CleanStats>, PartitionError> {
        let mut s = self.lock();
        if s.deleted {
            prepared.discard();
            return Ok(None);
        }
        Ok(Some(s.log.finish_clean(prepared)?))
    }

    /// Marks the partition deleted before its directory is removed (see `clean`).
    pub fn mark_deleted(&self) {
        self.lock().deleted = true;
    }

    pub fn size_bytes(&self) -> u64 {
        self.lock().log.size_bytes()
    }

    /// Flush and close the log (graceful shutdown).
    pub fn flush(&self) -> Result<(), PartitionError> {
        let mut s = self.lock();
        s.log.flush()?;
        s.flushed_through = s.log.log_end_offset();
        Ok(())
    }
}

#[cfg(test)]
mod tests;
