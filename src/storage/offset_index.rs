//! The sparse offset index of one segment (`<base offset>.index`).

use std::io;
use std::path::Path;

use super::index_file::{Entry, IndexFile};

/// Sparse map from offset to the file position of a batch in the segment's `.log`.
///
/// On disk: a sequence of 8-byte entries, no header:
///
/// ```text
/// relative offset  u32 big-endian   batch's last offset - segment base offset
/// position         u32 big-endian   byte position of that batch in the .log file
/// ```
///
/// Invariants: file length is a multiple of 8; both fields strictly increase from entry
/// to entry; every position is below the `.log` file's size. An entry is written roughly
/// every `index.interval.bytes` of log data, so a lookup lands at most that far before the
/// wanted batch and the reader scans forward. Position 0 (the first batch) is implicit.
/// The entries are also kept in memory and written behind ([`IndexFile`]).
#[derive(Debug)]
pub struct OffsetIndex {
    base_offset: i64,
    file: IndexFile<(u32, u32)>,
}

pub const OFFSET_ENTRY_LEN: usize = <(u32, u32) as Entry>::LEN;

impl OffsetIndex {
    /// Creates an empty index, replacing any file at `path`.
    pub fn create(path: &Path, base_offset: i64) -> io::Result<OffsetIndex> {
        Ok(OffsetIndex { base_offset, file: IndexFile::create(path)? })
    }

    /// Loads an existing index. `Ok(None)` when the file is missing or fails the sanity
    /// check (then the caller rebuilds it from the log).
    pub fn load(path: &Path, base_offset: i64, log_size: u64) -> io::Result<Option<OffsetIndex>> {
        let Some(file) = IndexFile::<(u32, u32)>::load(path)? else { return Ok(None) };
        let entries = file.entries();
        let monotonic = entries.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1);
        let within_log = entries.last().is_none_or(|&(_, pos)| u64::from(pos) < log_size);
        Ok((monotonic && within_log).then_some(OffsetIndex { base_offset, file }))
    }

    /// Adds an entry; `offset` and `position` must exceed the last entry's.
    pub fn append(&mut self, offset: i64, position: u64) -> io::Result<()> {
        let relative =
            u32::try_from(offset - self.base_offset).map_err(|_| invalid("offset does not fit the segment's index"))?;
        let position = u32::try_from(position).map_err(|_| invalid("position does not fit the index"))?;
        if let Some(&(last_rel, last_pos)) = self.file.entries().last() {
            if relative <= last_rel || position <= last_pos {
                return Err(invalid("offset index entries must increase"));
            }
        }
        self.file.push((relative, position))
    }

    /// The entry with the largest offset ≤ `target`, as (offset, position); the segment's
    /// start `(base_offset, 0)` when there is none.
    pub fn lookup(&self, target: i64) -> (i64, u64) {
        let entries = self.file.entries();
        let n = entries.partition_point(|&(rel, _)| self.base_offset + i64::from(rel) <= target);
        match n.checked_sub(1).map(|i| entries[i]) {
            Some((rel, pos)) => (self.base_offset + i64::from(rel), u64::from(pos)),
            None => (self.base_offset, 0),
        }
    }

    /// The position of the last indexed batch that starts at or before `position` (0,
    /// the segment's first batch, when none does): a batch boundary to scan forward from.
    pub fn lookup_position(&self, position: u64) -> u64 {
        let entries = self.file.entries();
        let n = entries.partition_point(|&(_, pos)| u64::from(pos) <= position);
        n.checked_sub(1).map_or(0, |i| u64::from(entries[i].1))
    }

    pub fn last_entry(&self) -> Option<(i64, u64)> {
        self.file.entries().last().map(|&(rel, pos)| (self.base_offset + i64::from(rel), u64::from(pos)))
    }

    pub fn len(&self) -> usize {
        self.file.entries().len()
    }

    pub fn is_empty(&self) -> bool {
        self.file.entries().is_empty()
    }

    /// Drops every entry pointing at `position` or beyond (the log is being cut there).
    pub fn truncate_to_position(&mut self, position: u64) -> io::Result<()> {
        let keep = self.file.entries().partition_point(|&(_, pos)| u64::from(pos) < position);
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

fn invalid(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_lookup_truncate_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.index");
        let mut idx = OffsetIndex::create(&path, 100).unwrap();
        assert_eq!(idx.lookup(150), (100, 0));
        idx.append(110, 4000).unwrap();
        idx.append(120, 8000).unwrap();
        idx.append(130, 12000).unwrap();
        assert!(idx.append(125, 13000).is_err());
        assert_eq!(idx.lookup(109), (100, 0));
        assert_eq!(idx.lookup(110), (110, 4000));
        assert_eq!(idx.lookup(125), (120, 8000));
        assert_eq!(idx.lookup(10_000), (130, 12000));

        idx.truncate_to_position(8000).unwrap();
        assert_eq!(idx.last_entry(), Some((110, 4000)));
        idx.append(115, 5000).unwrap();
        // Entries reach the file on flush (or seal); dropping before that loses only them.
        idx.flush().unwrap();
        idx.append(117, 5500).unwrap();
        drop(idx);

        let idx = OffsetIndex::load(&path, 100, 20000).unwrap().unwrap();
        assert_eq!(idx.len(), 2);
        assert_eq!(idx.lookup(116), (115, 5000));
        // An entry beyond the log's end means the index is stale.
        assert!(OffsetIndex::load(&path, 100, 5000).unwrap().is_none());
    }

    #[test]
    fn load_rejects_torn_or_unordered_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.index");
        assert!(OffsetIndex::load(&path, 0, 100).unwrap().is_none());
        std::fs::write(&path, [0u8; 7]).unwrap();
        assert!(OffsetIndex::load(&path, 0, 100).unwrap().is_none());
        let mut bytes = Vec::new();
        for (rel, pos) in [(5u32, 50u32), (4, 60)] {
            bytes.extend_from_slice(&rel.to_be_bytes());
            bytes.extend_from_slice(&pos.to_be_bytes());
        }
        std::fs::write(&path, &bytes).unwrap();
        assert!(OffsetIndex::load(&path, 0, 100).unwrap().is_none());
    }
}
