//! Reads: which whole batches a fetch returns, as byte ranges of the segment files.
//!
//! The plan is made under the partition's lock from the in-memory indexes and a few batch
//! headers (an index lookup lands within `index.interval.bytes` of the batch wanted); the
//! record bytes themselves are read or sent after the lock is released ([`LogSlices`]).

use bytes::Bytes;

use super::PartitionLog;
use crate::storage::error::StorageError;
use crate::storage::file_slice::LogSlices;

impl PartitionLog {
    /// Whole batches from the one containing `offset`, stopping before any batch whose
    /// base offset is ≥ `max_offset` and before exceeding `max_bytes` (the first batch is
    /// always returned whole). Empty at the log end offset or at/after `max_offset`.
    pub fn read_slices(&self, offset: i64, max_bytes: usize, max_offset: i64) -> Result<LogSlices, StorageError> {
        let log_end_offset = self.log_end_offset();
        if offset < self.log_start_offset || offset > log_end_offset {
            return Err(self.out_of_range(offset));
        }
        let mut out = LogSlices::default();
        if offset == log_end_offset || offset >= max_offset {
            return Ok(out);
        }
        let mut start = None;
        for (i, seg) in self.segments.iter().enumerate().skip(self.segment_index_for(offset)) {
            if let Some((pos, _)) = seg.find_batch(offset)? {
                start = Some((i, pos));
                break;
            }
        }
        let Some((first_segment, mut pos)) = start else {
            return Ok(out);
        };
        let mut taken = 0usize;
        for seg in &self.segments[first_segment..] {
            let file = seg.file()?;
            // Where the batches below `max_offset` end in this segment.
            let visible_end = if seg.next_offset() > max_offset {
                match seg.find_batch(max_offset)? {
                    Some((p, h)) if h.base_offset >= max_offset => p,
                    Some((p, h)) => p + h.total_len() as u64,
                    None => file.size(),
                }
            } else {
                file.size()
            };
            if visible_end <= pos {
                break;
            }
            let budget = max_bytes.saturating_sub(taken) as u64;
            let mut end = visible_end;
            if end - pos > budget {
                end = seg.batch_end_within(pos, pos + budget)?;
                if end == pos && taken == 0 {
                    // The first batch is returned whole even when larger than max_bytes.
                    let header = file.read_header(pos)?.ok_or_else(|| self.out_of_range(offset))?;
                    end = pos + header.total_len() as u64;
                }
            }
            let len = (end - pos) as usize;
            out.push(file.slice(pos, len));
            taken += len;
            if end < file.size() {
                break;
            }
            pos = 0;
        }
        Ok(out)
    }

    /// [`PartitionLog::read_slices`], copied into one buffer.
    pub fn read(&self, offset: i64, max_bytes: usize, max_offset: i64) -> Result<Bytes, StorageError> {
        Ok(self.read_slices(offset, max_bytes, max_offset)?.read()?)
    }
}
