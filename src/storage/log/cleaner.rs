//! The log cleaner: compaction of `cleanup.policy=compact` logs.
//!
//! A pass maps every key in the dirty (not yet cleaned) sealed segments to the offset of
//! its newest record, then rewrites the sealed segments up to there keeping only newest
//! records; the active segment is never touched. Offsets never change: a batch keeps its base offset and last offset delta
//! (so an idempotent producer's last sequence survives), and only the records inside it
//! go. Tombstones (null values) are kept for `delete.retention.ms` after their segment last
//! took data (a rewrite keeps the segment's mtime), so a consumer reading behind the head
//! still sees the delete.
//!
//! Compressed batches are decompressed (bounded, see [`crate::storage::codec`]); a
//! compressed batch that loses records is recompressed with its codec, as Kafka does (or
//! stored uncompressed when that is not smaller).
//! A batch that cannot be decompressed within the bound, and every control batch, is kept
//! whole and contributes no keys. Records without a key cannot be compacted and are
//! dropped, as Kafka does.
//!
//! Consecutive segments are merged while the result stays within `segment.bytes`. A
//! rewrite is crash safe:
//!
//! ```text
//! cleaner.tmp/N/  the new segments being written, one directory per group
//!                                                      (deleted when found on open)
//! cleaner.swap/   one new segment, complete and synced, plus `replaces`, the base
//!                 offsets of the segments it replaces  (the swap is finished on open)
//! ```
//!
//! A pass is planned under the partition's lock ([`PartitionLog::plan_clean`]: handles on
//! the sealed segments), prepared without it ([`CleanPlan::prepare`]: the reading,
//! filtering and writing), and finished under it again ([`PartitionLog::finish_clean`]:
//! a swap per group whose segments are unchanged). Produce and fetch wait only for the
//! swaps.
//!
//! Finishing a swap deletes the replaced segments, then moves the new segment's indexes
//! and finally its `.log` into the partition directory; while the `.log` is still in
//! `cleaner.swap/` the whole sequence can be repeated safely.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{PartitionLog, CLEANER_OFFSET_CHECKPOINT};
use crate::storage::batch::{split_batches, BatchHeader, Compression, BATCH_HEADER_LEN, LOG_OVERHEAD};
use crate::storage::checkpoint::{sync_dir, CheckpointFile};
use crate::storage::codec::compress;
use crate::storage::error::StorageError;
use crate::storage::file_cache::FileCache;
use crate::storage::record::{batch_records, RecordView};
use crate::storage::segment::{delete_segment_files, LogSegment, SegmentFile, LOG_SUFFIX};

const CLEANING_DIR: &str = "cleaner.tmp";
const SWAP_DIR: &str = "cleaner.swap";
const REPLACES_FILE: &str = "replaces";

/// Memory the key map of one pass may take (Kafka's `log.cleaner.dedupe.buffer.size`):
/// the pass cleans up to the last dirty segment mapped whole; the rest waits for the next.
pub(in crate::storage) const MAX_MAP_BYTES: usize = 128 << 20;
/// What an entry of the key map costs besides its key's bytes (key vector, offset, table).
const MAP_ENTRY_OVERHEAD: usize = 56;

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

/// Per pass: each key's newest offset in the dirty segments mapped, and each idempotent
/// producer's last batch in the cleanable segments.
struct OffsetMap {
    newest: HashMap<Vec<u8>, i64>,
    bytes: usize,
    max_bytes: usize,
    producer_last_batch: HashMap<i64, i64>,
}

impl OffsetMap {
    /// Records `offset` as the newest for `key`; false (and nothing recorded) when a new
    /// key would take the map past [`MAX_MAP_BYTES`].
    fn insert(&mut self, key: &[u8], offset: i64) -> bool {
        if let Some(newest) = self.newest.get_mut(key) {
            *newest = offset;
            return true;
        }
        let cost = key.len() + MAP_ENTRY_OVERHEAD;
        if self.bytes + cost > self.max_bytes {
            return false;
        }
        self.bytes += cost;
        self.newest.insert(key.to_vec(), offset);
        true
    }

    /// A record stays unless a newer record with its key was mapped. Keys not in the map
    /// belong to already cleaned segments, where each key appears once.
    fn is_newest(&self, key: &[u8], offset: i64) -> bool {
        self.newest.get(key).is_none_or(|&newest| newest == offset)
    }
}

/// A sealed segment as the cleaner saw it when it planned a pass.
#[derive(Debug, Clone)]
struct Sealed {
    base_offset: i64,
    next_offset: i64,
    file: SegmentFile,
    /// The `.log`'s mtime: when data was last appended (a rewrite keeps it).
    modified_ms: i64,
}

/// A pass decided on under the partition's lock; [`CleanPlan::prepare`] does the reading
/// and writing without it.
#[derive(Debug)]
pub struct CleanPlan {
    dir: PathBuf,
    segment_bytes: u64,
    index_interval_bytes: u64,
    delete_retention_ms: i64,
    /// The sealed segments, oldest first, and the base offset of the one after them.
    sealed: Vec<Sealed>,
    end_offset: i64,
    first_dirty_offset: i64,
    max_map_bytes: usize,
    files: Arc<FileCache>,
}

/// Cleaned segments written to `cleaner.tmp/`, waiting for [`PartitionLog::finish_clean`].
#[derive(Debug)]
pub struct PreparedClean {
    groups: Vec<PreparedGroup>,
    /// Where the cleaned range ends: the next dirty offset once every group is in.
    end_offset: i64,
    stats: CleanStats,
    /// Not even one dirty segment's keys fit the map: the log cannot be cleaned.
    map_too_small: bool,
}

#[derive(Debug)]
struct PreparedGroup {
    /// The segments replaced, as read.
    replaces: Vec<SegmentFile>,
    base_offset: i64,
    dir: PathBuf,
    records_removed: u64,
}

impl PartitionLog {
    /// Share of the cleanable bytes not yet cleaned, in thousandths (0 without any).
    pub fn dirty_permille(&self, now_ms: i64) -> u32 {
        self.dirty_permille_of(self.cleanable_segments(now_ms))
    }

    /// The same over the first `cleanable` segments.
    fn dirty_permille_of(&self, cleanable: usize) -> u32 {
        let cleanable = &self.segments[..cleanable];
        let total: u64 = cleanable.iter().map(LogSegment::size).sum();
        let dirty: u64 =
            cleanable.iter().filter(|s| s.base_offset() >= self.first_dirty_offset).map(LogSegment::size).sum();
        if total == 0 {
            return 0;
        }
        (dirty.saturating_mul(1000) / total) as u32
    }

    /// How many segments, from the first, the cleaner may touch: sealed ones whose newest
    /// record is at least `min.compaction.lag.ms` old.
    fn cleanable_segments(&self, now_ms: i64) -> usize {
        let sealed = &self.segments[..self.segments.len() - 1];
        let lag = self.config.min_compaction_lag_ms;
        if lag <= 0 {
            return sealed.len();
        }
        sealed.iter().take_while(|s| s.largest_timestamp().is_ok_and(|ts| now_ms.saturating_sub(ts) >= lag)).count()
    }

    /// True when the oldest dirty data has waited `max.compaction.lag.ms` (judged by the
    /// first batch of the first dirty segment, as Kafka does).
    fn compaction_overdue(&self, cleanable: usize, now_ms: i64) -> bool {
        let Some(first_dirty) = self.segments[..cleanable].iter().find(|s| s.base_offset() >= self.first_dirty_offset)
        else {
            return false;
        };
        match first_dirty.read_header(0) {
            Ok(Some(h)) if h.max_timestamp >= 0 => {
                now_ms.saturating_sub(h.max_timestamp) > self.config.max_compaction_lag_ms
            }
            _ => false,
        }
    }

    /// A cleaning pass is due when the log is compacted and its dirty ratio has reached
    /// `min.cleanable.dirty.ratio` (or its dirty data is overdue). Cheap: takes handles on
    /// the cleanable segments.
    pub fn plan_clean(&self, now_ms: i64) -> Option<CleanPlan> {
        if !self.config.cleanup_compact || self.uncleanable {
            return None;
        }
        let cleanable = self.cleanable_segments(now_ms);
        let has_dirty = self.segments[..cleanable].iter().any(|s| s.base_offset() >= self.first_dirty_offset);
        if !has_dirty {
            return None;
        }
        if self.dirty_permille_of(cleanable) < self.config.min_cleanable_dirty_permille
            && !self.compaction_overdue(cleanable, now_ms)
        {
            return None;
        }
        let sealed = self.segments[..cleanable]
            .iter()
            .map(|s| {
                Ok(Sealed {
                    base_offset: s.base_offset(),
                    next_offset: s.next_offset(),
                    file: s.file()?,
                    modified_ms: s.modified_ms().unwrap_or(now_ms),
                })
            })
            .collect::<std::io::Result<Vec<_>>>();
        let sealed = match sealed {
            Ok(sealed) => sealed,
            Err(e) => {
                // Out of descriptors, most likely: the next pass tries again.
                tracing::warn!(dir = %self.dir.display(), error = %e, "cannot open segments to clean");
                return None;
            }
        };
        Some(CleanPlan {
            dir: self.dir.clone(),
            segment_bytes: self.config.segment_bytes,
            index_interval_bytes: self.config.index_interval_bytes,
            delete_retention_ms: self.config.delete_retention_ms,
            sealed,
            end_offset: self.segments[cleanable].base_offset(),
            first_dirty_offset: self.first_dirty_offset,
            max_map_bytes: self.cleaner_map_bytes,
            files: Arc::clone(&self.files),
        })
    }

    /// Swaps prepared segments in, group by group, for as long as the segments each
    /// replaces are still there as they were read (retention, DeleteRecords or a
    /// truncation may have changed them meanwhile; such a group is dropped).
    pub fn finish_clean(&mut self, prepared: PreparedClean) -> Result<CleanStats, StorageError> {
        if prepared.map_too_small {
            tracing::error!(
                dir = %self.dir.display(),
                max_bytes = self.cleaner_map_bytes,
                "the cleaner's key map cannot hold the keys of one dirty segment; not cleaning this log until restart"
            );
            self.uncleanable = true;
        }
        let mut stats = prepared.stats;
        let mut groups = prepared.groups.into_iter();
        let mut all_in = true;
        for group in groups.by_ref() {
            let Some(first) = self.unchanged(&group.replaces) else {
                all_in = false;
                break;
            };
            // The swap replaces the files under the old segments' names; should it fail
            // halfway, those segments stay in the list and must keep reading the old data,
            // not whatever a reopen by name would find.
            for old in &self.segments[first..first + group.replaces.len()] {
                old.pin_log()?;
            }
            fs::rename(&group.dir, self.dir.join(SWAP_DIR))?;
            sync_dir(&self.dir)?;
            // From here a crash finishes the swap on the next open.
            finish_swap(&self.dir)?;
            let (segment, _) =
                LogSegment::open(&self.dir, group.base_offset, self.config.index_interval_bytes, false, &self.files)?;
            stats.bytes_after += segment.size();
            stats.segments_after += 1;
            stats.records_removed += group.records_removed;
            self.segments.splice(first..first + group.replaces.len(), [segment]);
        }
        let leftovers: Vec<_> = groups.collect();
        if !leftovers.is_empty() {
            tracing::info!(dir = %self.dir.display(), groups = leftovers.len(), "log changed during cleaning; retrying later");
        }
        remove_dir_if_present(&self.dir.join(CLEANING_DIR))?;
        if all_in && prepared.end_offset > self.first_dirty_offset {
            self.first_dirty_offset = prepared.end_offset;
            CheckpointFile::write_offset(&self.dir.join(CLEANER_OFFSET_CHECKPOINT), self.first_dirty_offset)?;
        }
        tracing::info!(
            dir = %self.dir.display(),
            segments_before = stats.segments_before,
            segments_after = stats.segments_after,
            bytes_before = stats.bytes_before,
            bytes_after = stats.bytes_after,
            records_removed = stats.records_removed,
            "cleaned log"
        );
        Ok(stats)
    }

    /// Index of the first of `replaces` if those segments are all still sealed, adjacent
    /// and the very files, of the size, they were when read.
    fn unchanged(&self, replaces: &[SegmentFile]) -> Option<usize> {
        let first = self.segments.iter().position(|s| replaces[0].is_file_of(s))?;
        let sealed = self.segments.len() - 1;
        let matches = first + replaces.len() <= sealed
            && replaces.iter().zip(&self.segments[first..]).all(|(r, s)| r.is_file_of(s));
        matches.then_some(first)
    }

    /// A whole pass under one borrow: plan, prepare and finish.
    pub fn clean(&mut self, now_ms: i64) -> Result<Option<CleanStats>, StorageError> {
        let Some(plan) = self.plan_clean(now_ms) else { return Ok(None) };
        let prepared = plan.prepare(now_ms)?;
        self.finish_clean(prepared).map(Some)
    }
}

impl PreparedClean {
    /// Drops the prepared output (the log it was for is gone).
    pub fn discard(self) {
        for group in self.groups {
            if let Err(e) = remove_dir_if_present(&group.dir) {
                tracing::warn!(dir = %group.dir.display(), error = %e, "could not remove discarded cleaner output");
            }
        }
    }
}

impl CleanPlan {
    /// Maps keys and writes the cleaned segments into `cleaner.tmp/`: the heavy part of a
    /// pass, which reads only the sealed segments and so needs no lock.
    pub fn prepare(self, now_ms: i64) -> Result<PreparedClean, StorageError> {
        let mut map = OffsetMap {
            newest: HashMap::new(),
            bytes: 0,
            max_bytes: self.max_map_bytes,
            producer_last_batch: HashMap::new(),
        };
        for seg in &self.sealed {
            for item in seg.file.batches_from(0) {
                let (_, h) = item?;
                if h.producer_id >= 0 {
                    map.producer_last_batch.insert(h.producer_id, h.base_offset);
                }
            }
        }
        // Keys come from the dirty segments only (the cleaned ones hold each key once), as
        // many whole segments as the map holds; the pass cleans everything before the
        // first segment not mapped whole.
        let first_dirty =
            self.sealed.iter().position(|s| s.base_offset >= self.first_dirty_offset).unwrap_or(self.sealed.len());
        let mut mapped = first_dirty;
        while mapped < self.sealed.len() && map_segment(&self.sealed[mapped].file, &mut map)? {
            mapped += 1;
        }
        let map_too_small = mapped == first_dirty && first_dirty < self.sealed.len();
        if map_too_small {
            mapped = 0;
        }
        let end_offset = self.sealed.get(mapped).map_or(self.end_offset, |s| s.base_offset);
        let tmp = self.dir.join(CLEANING_DIR);
        remove_dir_if_present(&tmp)?;
        fs::create_dir(&tmp)?;
        let stats = CleanStats {
            segments_before: mapped,
            bytes_before: self.sealed[..mapped].iter().map(|s| s.file.size()).sum(),
            ..CleanStats::default()
        };
        let mut groups = Vec::new();
        let mut first = 0;
        while first < mapped {
            let last = self.group_end(first, mapped);
            groups.push(self.write_group(&tmp.join(groups.len().to_string()), first, last, &map, now_ms)?);
            first = last;
        }
        Ok(PreparedClean { groups, end_offset, stats, map_too_small })
    }

    /// One past the last segment of the group starting at `first`: consecutive segments
    /// whose sizes add up to at most `segment.bytes` and whose offsets and positions fit
    /// one index (both are 32-bit there).
    fn group_end(&self, first: usize, limit: usize) -> usize {
        let base = self.sealed[first].base_offset;
        let mut size = self.sealed[first].file.size();
        let mut end = first + 1;
        while end < limit {
            let next = &self.sealed[end];
            size += next.file.size();
            let too_big = size > self.segment_bytes || size > u64::from(u32::MAX);
            if too_big || next.next_offset - base > i64::from(i32::MAX) {
                break;
            }
            end += 1;
        }
        end
    }

    /// Writes segments `first..last`, cleaned, as one segment with the base offset of the
    /// first, plus the `replaces` manifest, into `dir`, all synced.
    fn write_group(
        &self,
        dir: &Path,
        first: usize,
        last: usize,
        map: &OffsetMap,
        now_ms: i64,
    ) -> Result<PreparedGroup, StorageError> {
        let group = &self.sealed[first..last];
        fs::create_dir(dir)?;
        let mut out = LogSegment::create(dir, group[0].base_offset, self.index_interval_bytes, &self.files)?;
        let mut records_removed = 0;
        let mut buf = Vec::new();
        for seg in group {
            // A tombstone is kept for delete.retention.ms after its segment last took data
            // (or after its own timestamp, if later), not from its timestamp alone.
            let tombstones_expire = |ts: i64| now_ms.saturating_sub(ts.max(seg.modified_ms)) > self.delete_retention_ms;
            for item in seg.file.batches_from(0) {
                let (pos, h) = item?;
                let batch = seg.file.read(pos, h.total_len())?;
                records_removed += retain(&h, &batch, map, &tombstones_expire, &mut buf)?;
                if buf.len() >= 1 << 20 {
                    append_buffer(&mut out, &mut buf, now_ms)?;
                }
            }
        }
        append_buffer(&mut out, &mut buf, now_ms)?;
        out.seal()?;
        let modified_ms = group.iter().map(|s| s.modified_ms).max().unwrap_or(now_ms);
        out.set_modified_ms(modified_ms)?;
        out.flush()?;
        drop(out);
        let replaces: String = group.iter().map(|s| format!("{}\n", s.base_offset)).collect();
        let mut file = fs::File::create(dir.join(REPLACES_FILE))?;
        file.write_all(replaces.as_bytes())?;
        file.sync_all()?;
        sync_dir(dir)?;
        Ok(PreparedGroup {
            replaces: group.iter().map(|s| s.file.clone()).collect(),
            base_offset: group[0].base_offset,
            dir: dir.to_owned(),
            records_removed,
        })
    }
}

/// The records of a data batch (see [`batch_records`]). `None` for control batches and
/// for batches that cannot be read: those are kept whole, with a log line.
fn readable_records<'a>(h: &BatchHeader, batch: &'a [u8]) -> Option<(Cow<'a, [u8]>, Vec<RecordView>)> {
    if h.is_control() {
        return None;
    }
    batch_records(h, batch)
        .inspect_err(|e| tracing::warn!(offset = h.base_offset, error = %e, "cleaner keeps a batch it cannot read"))
        .ok()
}

/// Adds the keys of one segment's readable data batches to the map; false when the map
/// filled up before the segment was mapped whole.
fn map_segment(seg: &SegmentFile, map: &mut OffsetMap) -> Result<bool, StorageError> {
    for item in seg.batches_from(0) {
        let (pos, h) = item?;
        if h.is_control() {
            continue;
        }
        let batch = seg.read(pos, h.total_len())?;
        let Some((data, recs)) = readable_records(&h, &batch) else { continue };
        for r in recs {
            if let Some(key) = r.key {
                if !map.insert(&data[key], r.offset) {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}

/// Appends what survives of `batch` to `out`; returns the number of records removed.
/// A rewritten batch keeps its base offset, last offset delta, producer fields and base
/// timestamp (record deltas stay valid).
fn retain(
    h: &BatchHeader,
    batch: &[u8],
    map: &OffsetMap,
    tombstone_expired: &dyn Fn(i64) -> bool,
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
            map.is_newest(&data[key.clone()], r.offset) && !(r.value_is_null && tombstone_expired(r.timestamp))
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
    let mut section = Vec::new();
    for r in &kept {
        section.extend_from_slice(&data[r.bytes.clone()]);
    }
    // Recompressed with the batch's codec when that helps; an emptied batch is plain.
    let codec = h.compression();
    let packed = (codec != Compression::None && !kept.is_empty())
        .then(|| compress(codec, &section))
        .flatten()
        .filter(|p| p.len() < section.len());
    let start = out.len();
    out.extend_from_slice(&batch[..BATCH_HEADER_LEN]);
    out.extend_from_slice(packed.as_deref().unwrap_or(&section));
    let new = &mut out[start..];
    let batch_length = (new.len() - LOG_OVERHEAD) as i32;
    new[8..12].copy_from_slice(&batch_length.to_be_bytes());
    if packed.is_none() {
        new[22] &= !COMPRESSION_BITS; // attributes' low byte
    }
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
