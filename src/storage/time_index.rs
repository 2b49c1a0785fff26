//! The sparse time index of one segment (`<base offset>.timeindex`).

use std::io;
use std::path::Path;

use super::index_file::{Entry, IndexFile};

/// Sparse map from the segment's running max timestamp to the batch holding it.
///
/// On disk: a sequence of 12-byte entries, no header:
///
/// ```text
/// timestamp        i64 big-endian   max timestamp of the segment up to this batch
/// relative offset  u32 big-endian   that batch's base offset - segment base offset
/// ```
///
/// Invariants: file length is a multiple of 12; timestamps strictly increase and offsets
/// never decrease from entry to entry. Entry `(t, o)` therefore promises that no record
/// before the batch at `o` has a timestamp above `t`, so a search for the first record at
/// or after time `T` may start at the entry with the largest `t < T`.
#[derive(Debug)]
pub struct TimeIndex {
    base_offset: i64,
    file: IndexFile<(i64, u32)>,
}

pub const TIME_ENTRY_LEN: usize = <(i64, u32) as Entry>::LEN;

impl TimeIndex {
    /// Creates an empty index, replacing any file at `path`.
    pub fn create(path: &Path, base_offset: i64) -> io::Result<TimeIndex> {
        Ok(TimeIndex { base_offset, file: IndexFile::create(path)? })
    }

    /// Loads an existing index. `Ok(None)` when the file is missing or fails the sanity
    /// check (then the caller rebuilds it from the log).
    pub fn load(path: &Path, base_offset: i64) -> io::Result<Option<TimeIndex>> {
        let Some(file) = IndexFile::<(i64, u32)>::load(path)? else { return Ok(None) };
        let ordered = file.entries().windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1);
        Ok(ordered.then_some(TimeIndex { base_offset, file }))
    }

    /// Adds `(timestamp, offset)` if `timestamp` exceeds the last entry's; otherwise the
    /// entry would add nothing and is skipped.
    pub fn maybe_append(&mut self, timestamp: i64, offset: i64) -> io::Result<()> {
        let relative = u32::try_from(offset - self.base_offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset does not fit the time index"))?;
        if let Some(&(last_ts, last_rel)) = self.file.entries().last() {
            if timestamp <= last_ts {
                return Ok(());
            }
            if relative < last_rel {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, "time index offsets must not decrease"));
            }
        }
        self.file.push((timestamp, relative))
    }

    /// The entry with the largest timestamp ≤ `target`, as (timestamp, offset); `None`
    /// when every entry is later (search from the segment's start).
    pub fn lookup(&self, target: i64) -> Option<(i64, i64)> {
        let entries = self.file.entries();
        let n = entries.partition_point(|&(ts, _)| ts <= target);
        n.checked_sub(1).map(|i| entries[i]).map(|(ts, rel)| (ts, self.base_offset + i64::from(rel)))
    }

    pub fn last_entry(&self) -> Option<(i64, i64)> {
        self.file.entries().last().map(|&(ts, rel)| (ts, self.base_offset + i64::from(rel)))
    }

    pub fn len(&self) -> usize {
        self.file.entries().len()
    }

    pub fn is_empty(&self) -> bool {
        self.file.entries().is_empty()
    }

    /// Drops every entry at `offset` or beyond.
    pub fn truncate_to_offset(&mut self, offset: i64) -> io::Result<()> {
        let keep = self.file.entries().partition_point(|&(_, rel)| self.base_offset + i64::from(rel) < offset);
        self.file.truncate(keep)
    }

    /// Writes the entries not yet in the file.
    pub fn write_pending(&mut self) -> io::Result<()> {
        self.file.write_pending()
    }

    /// Whether [`Self::flush`] has anything to write or fsync.
    pub fn is_dirty(&self) -> bool {
        self.file.is_dirty()
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_lookup_truncate_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.timeindex");
        let mut idx = TimeIndex::create(&path, 100).unwrap();
        assert_eq!(idx.lookup(5), None);
        idx.maybe_append(1000, 100).unwrap();
        idx.maybe_append(900, 105).unwrap(); // not a new max: skipped
        idx.maybe_append(2000, 110).unwrap();
        idx.maybe_append(3000, 120).unwrap();
        assert_eq!(idx.len(), 3);
        assert_eq!(idx.lookup(999), None);
        assert_eq!(idx.lookup(1000), Some((1000, 100)));
        assert_eq!(idx.lookup(2500), Some((2000, 110)));
        idx.truncate_to_offset(120).unwrap();
        assert_eq!(idx.last_entry(), Some((2000, 110)));
        idx.flush().unwrap();
        drop(idx);

        let idx = TimeIndex::load(&path, 100).unwrap().unwrap();
        assert_eq!(idx.len(), 2);
        assert_eq!(idx.lookup(i64::MAX), Some((2000, 110)));
    }

    #[test]
    fn load_rejects_torn_or_unordered_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.timeindex");
        assert!(TimeIndex::load(&path, 0).unwrap().is_none());
        std::fs::write(&path, [0u8; 13]).unwrap();
        assert!(TimeIndex::load(&path, 0).unwrap().is_none());
        let mut bytes = Vec::new();
        for (ts, rel) in [(10i64, 1u32), (9, 2)] {
            bytes.extend_from_slice(&ts.to_be_bytes());
            bytes.extend_from_slice(&rel.to_be_bytes());
        }
        std::fs::write(&path, &bytes).unwrap();
        assert!(TimeIndex::load(&path, 0).unwrap().is_none());
    }
}
