//! One segment of a partition log: a `.log` file and its two sparse indexes.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use super::batch::{BatchHeader, BATCH_HEADER_LEN, MIN_BATCH_LENGTH};
use super::file_cache::{CachedFile, FileCache};
use super::file_slice::FileSlice;
use super::offset_index::OffsetIndex;
use super::time_index::TimeIndex;

pub const LOG_SUFFIX: &str = "log";
pub const INDEX_SUFFIX: &str = "index";
pub const TIME_INDEX_SUFFIX: &str = "timeindex";

/// Kafka's file name for a segment file: the base offset zero-padded to 20 digits.
pub fn segment_file_name(base_offset: i64, suffix: &str) -> String {
    format!("{base_offset:020}.{suffix}")
}

/// Removes a segment's three files; files already gone are not an error.
pub fn delete_segment_files(dir: &Path, base_offset: i64) -> io::Result<()> {
    for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX] {
        match fs::remove_file(dir.join(segment_file_name(base_offset, suffix))) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// Timestamp meaning "none" in Kafka's formats.
pub const NO_TIMESTAMP: i64 = -1;

/// A contiguous run of the partition's record batches.
///
/// On disk, `<base offset>.log` holds v2 record batches back to back exactly as produced
/// (after the broker stamped base offset and leader epoch); nothing else, no header.
/// `<base offset>.index` and `<base offset>.timeindex` are its sparse indexes
/// ([`OffsetIndex`], [`TimeIndex`]).
///
/// Invariants: batch offsets strictly increase and are all ≥ `base_offset`; `size` is the
/// `.log` length and ends on a batch boundary; `next_offset` is one past the last batch's
/// last offset (`base_offset` when empty); index entries only point at batches that exist.
/// Only the partition's last segment (the active one) is appended to.
///
/// The segment holds no descriptor: its `.log` is opened through the broker's
/// [`FileCache`] when read or written (so a sealed segment nobody reads costs none), and
/// the indexes live in memory and open their files only to write behind.
#[derive(Debug)]
pub struct LogSegment {
    base_offset: i64,
    log_path: PathBuf,
    log: CachedFile,
    /// Appended, truncated or recovered since the last fsync.
    unflushed: bool,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    size: u64,
    next_offset: i64,
    index_interval_bytes: u64,
    bytes_since_last_index_entry: u64,
    /// Largest batch max timestamp and the base offset of the batch that carries it.
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    /// When the first batch was appended (file mtime for a reopened segment); drives
    /// `segment.ms` rolls.
    created_ms: Option<i64>,
}

/// A read-only handle on a segment's `.log` with the size it had when taken. A sealed
/// segment never changes in place, so the log cleaner reads one through this handle
/// without holding the partition's lock.
#[derive(Debug, Clone)]
pub struct SegmentFile {
    file: Arc<File>,
    /// Which [`CachedFile`] it came from (descriptors are reopened, so not the `Arc`).
    segment_id: u64,
    size: u64,
}

impl SegmentFile {
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The header of the batch at `pos` if a complete, well-framed batch is there.
    pub fn read_header(&self, pos: u64) -> io::Result<Option<BatchHeader>> {
        if pos + BATCH_HEADER_LEN as u64 > self.size {
            return Ok(None);
        }
        let mut buf = [0u8; BATCH_HEADER_LEN];
        self.file.read_exact_at(&mut buf, pos)?;
        let Ok(h) = BatchHeader::parse(&buf) else {
            return Ok(None);
        };
        if h.batch_length < MIN_BATCH_LENGTH || pos + h.total_len() as u64 > self.size {
            return Ok(None);
        }
        Ok(Some(h))
    }

    /// Reads `len` bytes at `pos`.
    pub fn read(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, pos)?;
        Ok(buf)
    }

    pub fn batches_from(&self, pos: u64) -> BatchIter {
        BatchIter { file: Ok(self.clone()), pos }
    }

    /// `len` bytes from `pos`, as a handle that outlives the segment's lock.
    pub fn slice(&self, pos: u64, len: usize) -> FileSlice {
        FileSlice::new(Arc::clone(&self.file), pos, len)
    }

    /// Whether `segment` still is this very file, at this size.
    pub fn is_file_of(&self, segment: &LogSegment) -> bool {
        self.segment_id == segment.log.id() && self.size == segment.size
    }
}

/// Batch headers from a position onward: `(position, header)`. Stops at the end of the
/// segment or at the first position holding no complete, well-framed batch.
/// A segment whose file cannot be opened yields that error once.
pub struct BatchIter {
    file: Result<SegmentFile, Option<io::Error>>,
    pos: u64,
}

impl Iterator for BatchIter {
    type Item = io::Result<(u64, BatchHeader)>;
    fn next(&mut self) -> Option<Self::Item> {
        let file = match &mut self.file {
            Ok(f) => f,
            Err(e) => return e.take().map(Err),
        };
        match file.read_header(self.pos) {
            Ok(Some(h)) => {
                let at = self.pos;
                self.pos += h.total_len() as u64;
                Some(Ok((at, h)))
            }
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

/// State that an append changes, kept to undo a failed append.
struct Snapshot {
    size: u64,
    next_offset: i64,
    bytes_since_last_index_entry: u64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    created_ms: Option<i64>,
}

impl LogSegment {
    /// Creates an empty segment, replacing any files with its name.
    pub fn create(
        dir: &Path,
        base_offset: i64,
        index_interval_bytes: u64,
        files: &Arc<FileCache>,
    ) -> io::Result<LogSegment> {
        let log_path = dir.join(segment_file_name(base_offset, LOG_SUFFIX));
        let log = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&log_path)?;
        Ok(LogSegment {
            base_offset,
            log: files.insert(log_path.clone(), log),
            log_path,
            unflushed: true,
            offset_index: OffsetIndex::create(&dir.join(segment_file_name(base_offset, INDEX_SUFFIX)), base_offset)?,
            time_index: TimeIndex::create(&dir.join(segment_file_name(base_offset, TIME_INDEX_SUFFIX)), base_offset)?,
            size: 0,
            next_offset: base_offset,
            index_interval_bytes,
            bytes_since_last_index_entry: 0,
            max_timestamp: NO_TIMESTAMP,
            offset_of_max_timestamp: base_offset,
            created_ms: None,
        })
    }

    /// Opens an existing segment. With `recover`, or when an index is missing or fails its
    /// sanity check, every batch is checked and the indexes rebuilt (see [`Self::recover`]).
    /// Returns the segment and the number of bytes recovery cut off.
    pub fn open(
        dir: &Path,
        base_offset: i64,
        index_interval_bytes: u64,
        recover: bool,
        files: &Arc<FileCache>,
    ) -> io::Result<(LogSegment, u64)> {
        let log_path = dir.join(segment_file_name(base_offset, LOG_SUFFIX));
        // Only the metadata here: the file itself is opened through the cache when a
        // read needs it (a trusted sealed segment with intact indexes needs none).
        let meta = fs::metadata(&log_path)?;
        let size = meta.len();
        let created_ms = (size > 0).then(|| mtime_ms(&meta));
        let index_path = dir.join(segment_file_name(base_offset, INDEX_SUFFIX));
        let time_index_path = dir.join(segment_file_name(base_offset, TIME_INDEX_SUFFIX));
        let offset_index = OffsetIndex::load(&index_path, base_offset, size)?;
        let time_index = TimeIndex::load(&time_index_path, base_offset)?;
        let indexes_loaded = offset_index.is_some() && time_index.is_some();
        let mut segment = LogSegment {
            base_offset,
            log: files.register(log_path.clone()),
            log_path,
            unflushed: false,
            offset_index: match offset_index {
                Some(i) => i,
                None => OffsetIndex::create(&index_path, base_offset)?,
            },
            time_index: match time_index {
                Some(i) => i,
                None => TimeIndex::create(&time_index_path, base_offset)?,
            },
            size,
            next_offset: base_offset,
            index_interval_bytes,
            bytes_since_last_index_entry: 0,
            max_timestamp: NO_TIMESTAMP,
            offset_of_max_timestamp: base_offset,
            created_ms,
        };
        if !recover && indexes_loaded && segment.load_tail()? {
            return Ok((segment, 0));
        }
        if !recover {
            tracing::warn!(segment = %segment.log_path.display(), "index missing or inconsistent; rebuilding");
        }
        let truncated = segment.recover()?;
        Ok((segment, truncated))
    }

    /// Derives the in-memory state of a trusted segment from its indexes and the batches
    /// after the last offset index entry. False when the files disagree (rebuild needed).
    fn load_tail(&mut self) -> io::Result<bool> {
        let (mut pos, index_offset) = match self.offset_index.last_entry() {
            Some((offset, pos)) => (pos, Some(offset)),
            None => (0, None),
        };
        if let Some((ts, offset)) = self.time_index.last_entry() {
            self.max_timestamp = ts;
            self.offset_of_max_timestamp = offset;
        }
        let mut first = true;
        while pos < self.size {
            let Some(h) = self.read_header(pos)? else {
                return Ok(false);
            };
            if first && index_offset.is_some_and(|o| o != h.last_offset()) {
                return Ok(false);
            }
            first = false;
            if h.max_timestamp > self.max_timestamp {
                self.max_timestamp = h.max_timestamp;
                self.offset_of_max_timestamp = h.base_offset;
            }
            self.bytes_since_last_index_entry += h.total_len() as u64;
            self.next_offset = h.next_offset();
            pos += h.total_len() as u64;
        }
        let time_index_ok = self.time_index.last_entry().is_none_or(|(_, o)| o < self.next_offset);
        Ok(time_index_ok)
    }

    /// Checks every batch (framing, CRC-32C, counts, increasing offsets), cuts the file at
    /// the first bad or torn batch and rebuilds both indexes. Returns the bytes cut off.
    pub fn recover(&mut self) -> io::Result<u64> {
        self.offset_index.truncate_to_position(0)?;
        self.time_index.truncate_to_offset(self.base_offset)?;
        self.next_offset = self.base_offset;
        self.bytes_since_last_index_entry = 0;
        self.max_timestamp = NO_TIMESTAMP;
        self.offset_of_max_timestamp = self.base_offset;
        let mut pos = 0;
        while pos < self.size {
            match self.read_header(pos)? {
                Some(h) if self.batch_is_valid(pos, &h)? => {
                    self.index_batch(&h, pos)?;
                    pos += h.total_len() as u64;
                }
                _ => break,
            }
        }
        let truncated = self.size - pos;
        if truncated > 0 {
            tracing::warn!(
                segment = %self.log_path.display(),
                position = pos,
                bytes = truncated,
                "truncating invalid or torn batches at the end of the segment"
            );
            self.log.get()?.set_len(pos)?;
            self.size = pos;
            self.unflushed = true;
        }
        self.offset_index.write_pending()?;
        self.time_index.write_pending()?;
        Ok(truncated)
    }

    fn batch_is_valid(&self, pos: u64, h: &BatchHeader) -> io::Result<bool> {
        if h.records_count < 0 || h.last_offset_delta < 0 || h.base_offset < self.next_offset {
            return Ok(false);
        }
        Ok(self.crc_of_batch(pos, h)? == h.crc)
    }

    /// CRC-32C of the batch's CRC'd range, read in bounded chunks.
    fn crc_of_batch(&self, pos: u64, h: &BatchHeader) -> io::Result<u32> {
        const CRC_START: u64 = 21;
        let end = pos + h.total_len() as u64;
        let mut at = pos + CRC_START;
        let mut buf = vec![0u8; 64 * 1024];
        let mut crc = 0;
        let log = self.log.get()?;
        while at < end {
            let n = ((end - at) as usize).min(buf.len());
            log.read_exact_at(&mut buf[..n], at)?;
            crc = crc32c::crc32c_append(crc, &buf[..n]);
            at += n as u64;
        }
        Ok(crc)
    }

    /// The header of the batch at `pos` if a complete, well-framed batch is there.
    pub fn read_header(&self, pos: u64) -> io::Result<Option<BatchHeader>> {
        self.file()?.read_header(pos)
    }

    /// A handle on the `.log` as it is now (opening it if the cache had closed it).
    pub fn file(&self) -> io::Result<SegmentFile> {
        Ok(SegmentFile { file: self.log.get()?, segment_id: self.log.id(), size: self.size })
    }

    /// Updates indexes and running state for a batch written at `pos`.
    fn index_batch(&mut self, h: &BatchHeader, pos: u64) -> io::Result<()> {
        if h.max_timestamp > self.max_timestamp {
            self.max_timestamp = h.max_timestamp;
            self.offset_of_max_timestamp = h.base_offset;
        }
        if self.bytes_since_last_index_entry > self.index_interval_bytes {
            self.offset_index.append(h.last_offset(), pos)?;
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)?;
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += h.total_len() as u64;
        self.next_offset = h.next_offset();
        Ok(())
    }

    /// Appends `records` (the batches described by `headers`, offsets already assigned) with
    /// one positional write. On failure the segment is cut back to its previous end.
    pub fn append(&mut self, records: &[u8], headers: &[BatchHeader], now_ms: i64) -> io::Result<()> {
        let snapshot = Snapshot {
            size: self.size,
            next_offset: self.next_offset,
            bytes_since_last_index_entry: self.bytes_since_last_index_entry,
            max_timestamp: self.max_timestamp,
            offset_of_max_timestamp: self.offset_of_max_timestamp,
            created_ms: self.created_ms,
        };
        self.unflushed = true;
        let result = self.log.get().and_then(|log| log.write_all_at(records, self.size)).and_then(|()| {
            let mut pos = self.size;
            for h in headers {
                self.index_batch(h, pos)?;
                pos += h.total_len() as u64;
            }
            Ok(())
        });
        match result {
            Ok(()) => {
                self.size += records.len() as u64;
                self.created_ms.get_or_insert(now_ms);
                Ok(())
            }
            Err(e) => {
                self.restore(&snapshot)?;
                Err(e)
            }
        }
    }

    fn restore(&mut self, s: &Snapshot) -> io::Result<()> {
        self.log.get()?.set_len(s.size)?;
        self.offset_index.truncate_to_position(s.size)?;
        self.time_index.truncate_to_offset(s.next_offset)?;
        self.size = s.size;
        self.next_offset = s.next_offset;
        self.bytes_since_last_index_entry = s.bytes_since_last_index_entry;
        self.max_timestamp = s.max_timestamp;
        self.offset_of_max_timestamp = s.offset_of_max_timestamp;
        self.created_ms = s.created_ms;
        Ok(())
    }

    /// Fills `buf` from the log file at `pos`.
    pub fn read_into(&self, pos: u64, buf: &mut [u8]) -> io::Result<()> {
        self.log.get()?.read_exact_at(buf, pos)
    }

    /// Reads `len` bytes at `pos`.
    pub fn read(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        self.file()?.read(pos, len)
    }

    pub fn batches_from(&self, pos: u64) -> BatchIter {
        BatchIter { file: self.file().map_err(Some), pos }
    }

    /// Position and header of the first batch whose last offset is ≥ `offset`: an index
    /// lookup, then a forward scan of headers. `None` when the segment ends before it.
    pub fn find_batch(&self, offset: i64) -> io::Result<Option<(u64, BatchHeader)>> {
        if offset >= self.next_offset {
            return Ok(None);
        }
        let (_, start) = self.offset_index.lookup(offset);
        for item in self.batches_from(start) {
            let (pos, h) = item?;
            if h.last_offset() >= offset {
                return Ok(Some((pos, h)));
            }
        }
        Ok(None)
    }

    /// The end of the last whole batch that starts at or after `from` (a batch boundary)
    /// and ends at or before `limit`; `from` when the batch at `from` does not fit. An
    /// index lookup by position, then a forward scan of headers.
    pub fn batch_end_within(&self, from: u64, limit: u64) -> io::Result<u64> {
        let mut end = self.offset_index.lookup_position(limit).max(from);
        for item in self.batches_from(end) {
            let (pos, h) = item?;
            let next = pos + h.total_len() as u64;
            if next > limit {
                break;
            }
            end = next;
        }
        Ok(end)
    }

    /// Offset to start a search for the first record with timestamp ≥ `ts`.
    pub fn search_start_for_timestamp(&self, ts: i64) -> i64 {
        // Strictly below `ts`: an entry at exactly `ts` may have earlier records equal to it.
        match self.time_index.lookup(ts.saturating_sub(1)) {
            Some((_, offset)) => offset,
            None => self.base_offset,
        }
    }

    /// Removes the batch containing `offset` and everything after it. Returns bytes removed.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<u64> {
        let Some((pos, h)) = self.find_batch(offset)? else {
            return Ok(0);
        };
        let removed = self.size - pos;
        self.log.get()?.set_len(pos)?;
        self.unflushed = true;
        self.offset_index.truncate_to_position(pos)?;
        self.time_index.truncate_to_offset(h.base_offset)?;
        self.size = pos;
        self.next_offset = self.base_offset;
        self.bytes_since_last_index_entry = 0;
        self.max_timestamp = NO_TIMESTAMP;
        self.offset_of_max_timestamp = self.base_offset;
        if !self.load_tail()? {
            self.recover()?;
        }
        if self.size == 0 {
            self.created_ms = None;
        }
        Ok(removed)
    }

    /// Called when the segment stops being active: records its final max timestamp in the
    /// time index, so a reopen finds it without scanning.
    pub fn seal(&mut self) -> io::Result<()> {
        if self.max_timestamp != NO_TIMESTAMP {
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)?;
        }
        self.offset_index.write_pending()?;
        self.time_index.write_pending()
    }

    /// fdatasync of the log and both indexes; nothing when nothing changed since the
    /// last one (a broker with many idle partitions shuts down without touching them).
    pub fn flush(&mut self) -> io::Result<()> {
        if self.unflushed {
            let log = self.log.get()?;
            crate::metrics::timed_fsync(|| log.sync_data()).map_err(super::error::fsync_failed)?;
            self.unflushed = false;
        }
        self.offset_index.flush()?;
        self.time_index.flush()
    }

    /// Whether [`Self::flush`] would write or fsync anything.
    pub fn is_dirty(&self) -> bool {
        self.unflushed || self.offset_index.is_dirty() || self.time_index.is_dirty()
    }

    /// Records that the `.log` was fsynced through a handle from [`Self::log_file`].
    pub fn mark_log_synced(&mut self) {
        self.unflushed = false;
    }

    /// Removes the segment's files; indexes first, so a crash leaves a log whose indexes
    /// are rebuilt rather than orphan indexes.
    pub fn delete(self) -> io::Result<()> {
        for path in [self.offset_index.path(), self.time_index.path(), self.log_path.as_path()] {
            match fs::remove_file(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// One past the last offset in the segment.
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// `(max timestamp, base offset of the batch holding it)`; `None` without timestamps.
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        (self.max_timestamp != NO_TIMESTAMP).then_some((self.max_timestamp, self.offset_of_max_timestamp))
    }

    /// Timestamp retention compares against: the largest record timestamp, or the file's
    /// mtime when no batch carries one (as Kafka does).
    pub fn largest_timestamp(&self) -> io::Result<i64> {
        if self.max_timestamp > 0 {
            return Ok(self.max_timestamp);
        }
        Ok(mtime_ms(&fs::metadata(&self.log_path)?))
    }

    pub fn created_ms(&self) -> Option<i64> {
        self.created_ms
    }

    /// The `.log`'s mtime in milliseconds.
    pub fn modified_ms(&self) -> io::Result<i64> {
        Ok(mtime_ms(&fs::metadata(&self.log_path)?))
    }

    /// Sets the `.log`'s mtime, e.g. to keep a rewritten segment's age.
    pub fn set_modified_ms(&self, ms: i64) -> io::Result<()> {
        let t = UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
        self.log.get()?.set_modified(t)
    }

    /// Keeps this segment's current `.log` descriptor for as long as the segment lives,
    /// whatever the cache evicts (used while its file is about to be replaced by name).
    pub fn pin_log(&self) -> io::Result<()> {
        self.log.pin()
    }

    /// The open `.log` (opened through the cache if it was closed). The handle stays
    /// valid while held, even if the cache evicts it meanwhile.
    pub fn log_file(&self) -> io::Result<Arc<File>> {
        self.log.get()
    }

    pub fn offset_index(&self) -> &OffsetIndex {
        &self.offset_index
    }
}

fn mtime_ms(meta: &fs::Metadata) -> i64 {
    meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests;
