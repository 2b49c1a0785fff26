//! Read-only lookups: ListOffsets by timestamp, max timestamp, leader epochs, headers.

use super::PartitionLog;
use crate::storage::batch::BatchHeader;
use crate::storage::error::StorageError;
use crate::storage::record::batch_records;

impl PartitionLog {
    /// ListOffsets by timestamp: the earliest `(offset, timestamp)` with timestamp ≥ `ts`
    /// at or after the log start offset, exact per record (compressed batches are
    /// decompressed, bounded; one that cannot be read answers with its base offset and max
    /// timestamp).
    pub fn offset_for_timestamp(&self, ts: i64) -> Result<Option<(i64, i64)>, StorageError> {
        let candidates = self
            .segments
            .iter()
            .filter(|s| s.next_offset() > self.log_start_offset)
            .filter(|s| s.max_timestamp().is_some_and(|(max, _)| max >= ts));
        for segment in candidates {
            let start = segment.search_start_for_timestamp(ts).max(self.log_start_offset);
            let Some((pos, _)) = segment.find_batch(start)? else {
                continue;
            };
            for item in segment.batches_from(pos) {
                let (at, h) = item?;
                if h.max_timestamp < ts || h.last_offset() < self.log_start_offset {
                    continue;
                }
                let batch = segment.read(at, h.total_len())?;
                let found = match batch_records(&h, &batch) {
                    Ok((_, records)) => records
                        .into_iter()
                        .find(|r| r.timestamp >= ts && r.offset >= self.log_start_offset)
                        .map(|r| (r.offset, r.timestamp)),
                    // Unreadable records: answer at batch granularity.
                    Err(_) => Some((h.base_offset.max(self.log_start_offset), h.max_timestamp)),
                };
                if found.is_some() {
                    return Ok(found);
                }
            }
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP: `(timestamp, offset)` of the record with the largest
    /// timestamp (the first such), exact as in [`Self::offset_for_timestamp`]. `None` when
    /// no record carries a timestamp.
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        let (segment, (ts, batch_offset)) = self.segments.iter().filter_map(|s| Some((s, s.max_timestamp()?))).fold(
            None,
            |best: Option<(_, (i64, i64))>, cur| match best {
                Some(b) if b.1 .0 >= cur.1 .0 => Some(b),
                _ => Some(cur),
            },
        )?;
        let exact = segment.find_batch(batch_offset).ok().flatten().filter(|(_, h)| h.max_timestamp == ts).and_then(
            |(pos, h)| {
                let batch = segment.read(pos, h.total_len()).ok()?;
                let (_, records) = batch_records(&h, &batch).ok()?;
                records.into_iter().find(|r| r.timestamp == ts).map(|r| r.offset)
            },
        );
        Some((ts, exact.unwrap_or(batch_offset)))
    }

    /// OffsetForLeaderEpoch: the largest known epoch ≤ `epoch` and the start offset of the
    /// next epoch (the log end offset for the latest). `None` when `epoch` is newer than
    /// every known epoch or none is known.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        self.epochs.end_offset_for(epoch, self.log_end_offset())
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.epochs.latest_epoch()
    }

    /// Headers of every batch from the one containing `offset` (clamped to the log start
    /// offset) to the log end, e.g. to rebuild idempotent-producer state after a restart.
    pub fn batch_headers_from(&self, offset: i64) -> Result<Vec<BatchHeader>, StorageError> {
        if offset > self.log_end_offset() {
            return Err(self.out_of_range(offset));
        }
        let offset = offset.max(self.log_start_offset);
        let mut headers = Vec::new();
        for segment in &self.segments[self.segment_index_for(offset)..] {
            let Some((pos, _)) = segment.find_batch(offset)? else {
                continue;
            };
            for item in segment.batches_from(pos) {
                headers.push(item?.1);
            }
        }
        Ok(headers)
    }
}
