//! The log cleaner: compaction of `cleanup.policy=compact` logs.
//!
//! A pass maps every key in the sealed segments to the offset of its newest record, then
//! rewrites those segments keeping only newest records; the active segment is never
//! touched. Offsets never change: a batch keeps its base offset and last offset delta
//! (so an idempotent producer's last sequence survives), and only the records inside it
//! go. Tombstones (null values) are kept while younger than `delete.retention.ms`, so a
//! consumer reading behind the head still sees the delete.
//!
//! Compressed batches are decompressed (bounded, see [`crate::storage::codec`]); a
//! compressed batch that loses records is rewritten uncompressed, which Kafka clients read
//! like any other batch (Kafka recompresses with the original codec; runnel does not yet).
//! A batch that cannot be decompressed within the bound, and every control batch, is kept
//! whole and contributes no keys. Records without a key cannot be compacted and are
//! dropped, as Kafka does.
//!
//! Consecutive segments are merged while the result stays within `segment.bytes`. A
//! rewrite is crash safe:
//!
//! ```text
//! cleaner.tmp/    the new segment being written        (deleted when found on open)
//! cleaner.swap/   the new segment, complete and synced, plus `replaces`, the base
//!                 offsets of the segments it replaces  (the swap is finished on open)
//! ```
//!
//! Finishing a swap deletes the replaced segments, then moves the new segment's indexes
//! and finally its `.log` into the partition directory; while the `.log` is still in
//! `cleaner.swap/` the whole sequence can be repeated safely.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::path::Path;

use super::recovery::delete_segment_files;
use super::PartitionLog;
use crate::storage::batch::{split_batches, BatchHeader, Compression, BATCH_HEADER_LEN, LOG_OVERHEAD};
use crate::storage::checkpoint::sync_dir;
use crate::storage::codec::decompress;
use crate::storage::error::StorageError;
use crate::storage::record::{records_from, RecordView};
use crate::storage::segment::{LogSegment, LOG_SUFFIX};

const CLEANING_DIR: &str = "cleaner.tmp";
const SWAP_DIR: &str = "cleaner.swap";
const REPLACES_FILE: &str = "replaces";

/// Key bytes mapped in one pass before the cleaner stops at a segment boundary (Kafka's
/// `log.cleaner.dedupe.buffer.size` plays this role); the rest waits for the next pass.
const MAX_MAP_BYTES: usize = 64 << 20;

/// Largest record section the cleaner decompresses; bigger batches are kept whole.
const MAX_DECOMPRESSED_BYTES: usize = 64 << 20;

const COMPRESSION_BITS: u8 = 0x07;

/// What one cleaning pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanStats {
    pub segments_before: usize,
    pub segments_after: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_removed: u64,
}

/// Per pass: each key's newest offset, and each idempotent producer's last batch.
#[derive(Default)]
struct OffsetMap {
    newest: HashMap<Vec<u8>, i64>,
    key_bytes: usize,
    producer_last_batch: HashMap<i64, i64>,
}

impl PartitionLog {
    /// Share of the sealed bytes not yet cleaned, in thousandths (0 without sealed data).
    pub fn dirty_permille(&self) -> u32 {
        let sealed = &self.segments[..self.segments.len() - 1];
        let total: u64 = sealed.iter().map(LogSegment::size).sum();
        let dirty: u64 =
            sealed.iter().filter(|s| s.base_offset() >= self.first_dirty_offset).map(LogSegment::size).sum();
        if total == 0 {
            return 0;
        }
        (dirty.saturating_mul(1000) / total) as u32
    }

    /// One cleaning pass when the log is compacted and its dirty ratio has reached
    /// `min.cleanable.dirty.ratio`; `None` when there was nothing to do.
    pub fn clean(&mut self, now_ms: i64) -> Result<Option<CleanStats>, StorageError> {
        let sealed = self.segments.len() - 1;
        if !self.config.cleanup_compact || sealed == 0 {
            return Ok(None);
        }
        let has_dirty = self.segments[..sealed].iter().any(|s| s.base_offset() >= self.first_dirty_offset);
        if !has_dirty || self.dirty_permille() < self.config.min_cleanable_dirty_permille {
            return Ok(None);
        }
        let mut map = OffsetMap::default();
        let mut mapped = 0;
        while mapped < sealed && (mapped == 0 || map.key_bytes < MAX_MAP_BYTES) {
            map_segment(&self.segments[mapped], &mut map)?;
            mapped += 1;
        }
        let mut stats = CleanStats {
            segments_before: mapped,
            bytes_before: self.segments[..mapped].iter().map(LogSegment::size).sum(),
            ..CleanStats::default()
        };
        let mut first = 0;
        while first < mapped {
            let last = self.group_end(first, mapped);
            stats.records_removed += self.clean_group(first, last, &map, now_ms)?;
            stats.segments_after += 1;
            // The group is now one segment at index `first`.
            mapped -= last - first - 1;
            first += 1;
        }
        stats.bytes_after = self.segments[..stats.segments_after].iter().map(LogSegment::size).sum();
        self.first_dirty_offset = self.segments[stats.segments_after].base_offset();
        tracing::info!(
            dir = %self.dir.display(),
            segments_before = stats.segments_before,
            segments_after = stats.segments_after,
            bytes_before = stats.bytes_before,
            bytes_after = stats.bytes_after,
            records_removed = stats.records_removed,
            "cleaned log"
        );
        Ok(Some(stats))
    }

    /// One past the last segment of the group starting at `first`: consecutive segments
    /// whose sizes add up to at most `segment.bytes` and whose offsets fit one index
    /// (relative offsets are 32-bit).
    fn group_end(&self, first: usize, limit: usize) -> usize {
        let base = self.segments[first].base_offset();
        let mut size = self.segments[first].size();
        let mut end = first + 1;
        while end < limit {
            let next = &self.segments[end];
            size += next.size();
            if size > self.config.segment_bytes || next.next_offset() - base > i64::from(i32::MAX) {
                break;
            }
            end += 1;
        }
        end
    }

    /// Rewrites segments `first..last` as one segment with the base offset of the first;
    /// returns the number of records removed.
    fn clean_group(&mut self, first: usize, last: usize, map: &OffsetMap, now_ms: i64) -> Result<u64, StorageError> {
        let base = self.segments[first].base_offset();
        let tmp = self.dir.join(CLEANING_DIR);
        remove_dir_if_present(&tmp)?;
        fs::create_dir(&tmp)?;
        let mut out = LogSegment::create(&tmp, base, self.config.index_interval_bytes)?;
        let mut removed = 0;
        let mut buf = Vec::new();
        for seg in &self.segments[first..last] {
            for item in seg.batches_from(0) {
                let (pos, h) = item?;
                let batch = seg.read(pos, h.total_len())?;
                removed += retain(&h, &batch, map, now_ms, self.config.delete_retention_ms, &mut buf)?;
                if buf.len() >= 1 << 20 {
                    append_buffer(&mut out, &mut buf, now_ms)?;
                }
            }
        }
        append_buffer(&mut out, &mut buf, now_ms)?;
        out.seal()?;
        out.flush()?;
        drop(out);
        let replaces: String = self.segments[first..last].iter().map(|s| format!("{}\n", s.base_offset())).collect();
        let mut file = fs::File::create(tmp.join(REPLACES_FILE))?;
        file.write_all(replaces.as_bytes())?;
        file.sync_all()?;
        sync_dir(&tmp)?;
        fs::rename(&tmp, self.dir.join(SWAP_DIR))?;
        sync_dir(&self.dir)?;
        // From here a crash finishes the swap on the next open.
        self.segments.drain(first..last);
        finish_swap(&self.dir)?;
        let (segment, _) = LogSegment::open(&self.dir, base, self.config.index_interval_bytes, false)?;
        self.segments.insert(first, segment);
        Ok(removed)
    }
}

/// The records of a data batch and the bytes their ranges index: the batch itself when
/// uncompressed, else its decompressed record section. `None` for control batches and
/// for batches that cannot be read (kept whole, with a log line).
fn readable_records<'a>(h: &BatchHeader, batch: &'a [u8]) -> Option<(Cow<'a, [u8]>, Vec<RecordView>)> {
    if h.is_control() {
        return None;
    }
    let (data, start) = match h.compression() {
        Compression::None => (Cow::Borrowed(batch), BATCH_HEADER_LEN),
        codec => match decompress(codec, &batch[BATCH_HEADER_LEN..], MAX_DECOMPRESSED_BYTES) {
            Ok(plain) => (Cow::Owned(plain), 0),
            Err(e) => {
                tracing::warn!(offset = h.base_offset, error = %e, "cleaner keeps a batch it cannot decompress");
                return None;
            }
        },
    };
    match records_from(h, &data, start) {
        Ok(recs) => Some((data, recs)),
        Err(e) => {
            tracing::warn!(offset = h.base_offset, error = %e, "cleaner keeps a batch with unreadable records");
            None
        }
    }
}

/// Adds the keys of one segment's readable data batches to the map.
fn map_segment(seg: &LogSegment, map: &mut OffsetMap) -> Result<(), StorageError> {
    for item in seg.batches_from(0) {
        let (pos, h) = item?;
        if h.producer_id >= 0 {
            map.producer_last_batch.insert(h.producer_id, h.base_offset);
        }
        if h.is_control() {
            continue;
        }
        let batch = seg.read(pos, h.total_len())?;
        let Some((data, recs)) = readable_records(&h, &batch) else { continue };
        for r in recs {
            if let Some(key) = r.key {
                let key = &data[key];
                match map.newest.get_mut(key) {
                    Some(offset) => *offset = r.offset,
                    None => {
                        map.key_bytes += key.len();
                        map.newest.insert(key.to_vec(), r.offset);
                    }
                }
            }
        }
    }
    Ok(())
}

/// Appends what survives of `batch` to `out`; returns the number of records removed.
/// A rewritten batch keeps its base offset, last offset delta, producer fields and base
/// timestamp (record deltas stay valid) and is stored uncompressed.
fn retain(
    h: &BatchHeader,
    batch: &[u8],
    map: &OffsetMap,
    now_ms: i64,
    delete_retention_ms: i64,
    out: &mut Vec<u8>,
) -> Result<u64, StorageError> {
    let Some((data, all)) = readable_records(h, batch) else {
        out.extend_from_slice(batch);
        return Ok(0);
    };
    let kept: Vec<_> = all
        .iter()
        .filter(|r| {
            let Some(key) = &r.key else { return false };
            let newest = map.newest.get(&data[key.clone()]) == Some(&r.offset);
            newest && !(r.value_is_null && now_ms.saturating_sub(r.timestamp) > delete_retention_ms)
        })
        .collect();
    let removed = (all.len() - kept.len()) as u64;
    if removed == 0 {
        out.extend_from_slice(batch);
        return Ok(0);
    }
    // An idempotent producer's last batch stays, even empty, to keep its sequence state.
    let producer_state = h.producer_id >= 0 && map.producer_last_batch.get(&h.producer_id) == Some(&h.base_offset);
    if kept.is_empty() && !producer_state {
        return Ok(removed);
    }
    let start = out.len();
    out.extend_from_slice(&batch[..BATCH_HEADER_LEN]);
    for r in &kept {
        out.extend_from_slice(&data[r.bytes.clone()]);
    }
    let new = &mut out[start..];
    let batch_length = (new.len() - LOG_OVERHEAD) as i32;
    new[8..12].copy_from_slice(&batch_length.to_be_bytes());
    new[22] &= !COMPRESSION_BITS; // attributes' low byte
    if !h.uses_log_append_time() {
        let max_ts = kept.iter().map(|r| r.timestamp).max().unwrap_or(h.max_timestamp);
        new[35..43].copy_from_slice(&max_ts.to_be_bytes());
    }
    new[57..61].copy_from_slice(&(kept.len() as i32).to_be_bytes());
    let crc = crc32c::crc32c(&new[21..]);
    new[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(removed)
}

fn append_buffer(out: &mut LogSegment, buf: &mut Vec<u8>, now_ms: i64) -> Result<(), StorageError> {
    if buf.is_empty() {
        return Ok(());
    }
    let headers = split_batches(buf)?;
    out.append(buf, &headers, now_ms)?;
    buf.clear();
    Ok(())
}

fn remove_dir_if_present(dir: &Path) -> io::Result<()> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// On open: drops a half-written cleaned segment and finishes an interrupted swap.
pub(super) fn recover_interrupted_clean(dir: &Path) -> io::Result<()> {
    let tmp = dir.join(CLEANING_DIR);
    if tmp.exists() {
        tracing::warn!(dir = %dir.display(), "discarding an unfinished cleaner output");
        remove_dir_if_present(&tmp)?;
    }
    if dir.join(SWAP_DIR).exists() {
        tracing::warn!(dir = %dir.display(), "finishing an interrupted cleaner swap");
        finish_swap(dir)?;
    }
    Ok(())
}

/// Replaces the segments listed in `cleaner.swap/replaces` by the segment in
/// `cleaner.swap/`. Idempotent until the new `.log` has moved, which happens last.
fn finish_swap(dir: &Path) -> io::Result<()> {
    let swap = dir.join(SWAP_DIR);
    let mut new_log = None;
    let mut others = Vec::new();
    for entry in fs::read_dir(&swap)? {
        let name = entry?.file_name();
        match name.to_str() {
            Some(REPLACES_FILE) => {}
            Some(n) if n.ends_with(&format!(".{LOG_SUFFIX}")) => new_log = Some(name),
            _ => others.push(name),
        }
    }
    if let Some(new_log) = new_log {
        let replaces = fs::read_to_string(swap.join(REPLACES_FILE))?;
        for line in replaces.lines() {
            let base: i64 = line
                .trim()
                .parse()
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad cleaner swap manifest"))?;
            delete_segment_files(dir, base)?;
        }
        sync_dir(dir)?;
        for name in others {
            fs::rename(swap.join(&name), dir.join(&name))?;
        }
        fs::rename(swap.join(&new_log), dir.join(&new_log))?;
        sync_dir(dir)?;
    }
    remove_dir_if_present(&swap)?;
    sync_dir(dir)
}

#[cfg(test)]
mod tests;
