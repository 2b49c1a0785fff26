//! The sparse offset index of one segment (`<base offset>.index`).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

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
/// The entries are also kept in memory; the file is only read on open.
#[derive(Debug)]
pub struct OffsetIndex {
    path: PathBuf,
    file: File,
    base_offset: i64,
    entries: Vec<(u32, u32)>,
    /// Entries below this index are in the file; the rest are written in batches (on
    /// flush, seal, or every PENDING_WRITE entries) so an append costs no syscall. A
    /// crash loses only unwritten entries: lookups then scan a little further.
    persisted: usize,
}

pub const OFFSET_ENTRY_LEN: usize = 8;

/// Entries buffered in memory before they are written to the file.
const PENDING_WRITE: usize = 128;

/// Append `entries`, encoded, to an index file with one write. Shared by both indexes.
pub(super) fn write_entries<E: Copy, const N: usize>(
    file: &mut File,
    entries: &[E],
    encode: fn(E) -> [u8; N],
) -> io::Result<()> {
    let mut buf = Vec::with_capacity(entries.len() * N);
    for e in entries {
        buf.extend_from_slice(&encode(*e));
    }
    file.write_all(&buf)
}

fn encode_entry((relative, position): (u32, u32)) -> [u8; OFFSET_ENTRY_LEN] {
    let mut entry = [0u8; OFFSET_ENTRY_LEN];
    entry[..4].copy_from_slice(&relative.to_be_bytes());
    entry[4..].copy_from_slice(&position.to_be_bytes());
    entry
}

impl OffsetIndex {
    /// Creates an empty index, replacing any file at `path`.
    pub fn create(path: &Path, base_offset: i64) -> io::Result<OffsetIndex> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        file.set_len(0)?;
        Ok(OffsetIndex { path: path.to_owned(), file, base_offset, entries: Vec::new(), persisted: 0 })
    }

    /// Loads an existing index. `Ok(None)` when the file is missing or fails the sanity
    /// check (then the caller rebuilds it from the log).
    pub fn load(path: &Path, base_offset: i64, log_size: u64) -> io::Result<Option<OffsetIndex>> {
        let mut file = match OpenOptions::new().read(true).append(true).open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        if bytes.len() % OFFSET_ENTRY_LEN != 0 {
            return Ok(None);
        }
        let entries: Vec<(u32, u32)> = bytes
            .chunks_exact(OFFSET_ENTRY_LEN)
            .map(|e| (u32::from_be_bytes([e[0], e[1], e[2], e[3]]), u32::from_be_bytes([e[4], e[5], e[6], e[7]])))
            .collect();
        let monotonic = entries.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1);
        let within_log = entries.last().is_none_or(|&(_, pos)| u64::from(pos) < log_size);
        if !monotonic || !within_log {
            return Ok(None);
        }
        let persisted = entries.len();
        Ok(Some(OffsetIndex { path: path.to_owned(), file, base_offset, entries, persisted }))
    }

    /// Adds an entry; `offset` and `position` must exceed the last entry's.
    pub fn append(&mut self, offset: i64, position: u64) -> io::Result<()> {
        let relative =
            u32::try_from(offset - self.base_offset).map_err(|_| invalid("offset does not fit the segment's index"))?;
        let position = u32::try_from(position).map_err(|_| invalid("position does not fit the index"))?;
        if let Some(&(last_rel, last_pos)) = self.entries.last() {
            if relative <= last_rel || position <= last_pos {
                return Err(invalid("offset index entries must increase"));
            }
        }
        self.entries.push((relative, position));
        if self.entries.len() - self.persisted >= PENDING_WRITE {
            self.write_pending()?;
        }
        Ok(())
    }

    /// The entry with the largest offset ≤ `target`, as (offset, position); the segment's
    /// start `(base_offset, 0)` when there is none.
    pub fn lookup(&self, target: i64) -> (i64, u64) {
        let n = self.entries.partition_point(|&(rel, _)| self.base_offset + i64::from(rel) <= target);
        match n.checked_sub(1).map(|i| self.entries[i]) {
            Some((rel, pos)) => (self.base_offset + i64::from(rel), u64::from(pos)),
            None => (self.base_offset, 0),
        }
    }

    pub fn last_entry(&self) -> Option<(i64, u64)> {
        self.entries.last().map(|&(rel, pos)| (self.base_offset + i64::from(rel), u64::from(pos)))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Drops every entry pointing at `position` or beyond (the log is being cut there).
    pub fn truncate_to_position(&mut self, position: u64) -> io::Result<()> {
        let keep = self.entries.partition_point(|&(_, pos)| u64::from(pos) < position);
        if keep < self.persisted {
            self.file.set_len((keep * OFFSET_ENTRY_LEN) as u64)?;
            self.persisted = keep;
        }
        self.entries.truncate(keep);
        Ok(())
    }

    /// Write the entries not yet in the file.
    pub fn write_pending(&mut self) -> io::Result<()> {
        if self.persisted == self.entries.len() {
            return Ok(());
        }
        write_entries(&mut self.file, &self.entries[self.persisted..], encode_entry)?;
        self.persisted = self.entries.len();
        Ok(())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.write_pending()?;
        self.file.sync_data()
    }

    pub fn path(&self) -> &Path {
        &self.path
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
