//! The storage both sparse indexes share: fixed-size big-endian entries, kept in memory
//! and written behind to their file. No descriptor is held: the file is opened for each
//! batched write, truncation or fsync and closed again, so an index costs memory, not
//! one of the broker's bounded descriptors.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// One fixed-size index entry.
pub(super) trait Entry: Copy {
    const LEN: usize;
    fn encode(self, out: &mut Vec<u8>);
    /// Decodes exactly `LEN` bytes.
    fn decode(bytes: &[u8]) -> Self;
}

/// Entries buffered in memory before they are written to the file.
const PENDING_WRITE: usize = 128;

/// An index file's entries. Entries below `persisted` are in the file; the rest are
/// written in batches (on flush, seal, or every `PENDING_WRITE` entries) so an append
/// costs no syscall. A crash loses only unwritten entries: lookups then scan a little
/// further. The file is only read on open.
#[derive(Debug)]
pub(super) struct IndexFile<E> {
    path: PathBuf,
    entries: Vec<E>,
    persisted: usize,
    /// Written (or truncated) since the last fsync.
    unsynced: bool,
}

impl<E: Entry> IndexFile<E> {
    /// Creates an empty index, replacing any file at `path`.
    pub fn create(path: &Path) -> io::Result<IndexFile<E>> {
        OpenOptions::new().create(true).write(true).truncate(true).open(path)?;
        Ok(IndexFile { path: path.to_owned(), entries: Vec::new(), persisted: 0, unsynced: true })
    }

    /// Loads an existing index: `Ok(None)` when the file is missing or not a whole number
    /// of entries (the caller rebuilds it from the log).
    pub fn load(path: &Path) -> io::Result<Option<IndexFile<E>>> {
        let mut file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        if bytes.len() % E::LEN != 0 {
            return Ok(None);
        }
        let entries: Vec<E> = bytes.chunks_exact(E::LEN).map(E::decode).collect();
        let persisted = entries.len();
        Ok(Some(IndexFile { path: path.to_owned(), entries, persisted, unsynced: false }))
    }

    pub fn entries(&self) -> &[E] {
        &self.entries
    }

    pub fn push(&mut self, entry: E) -> io::Result<()> {
        self.entries.push(entry);
        if self.entries.len() - self.persisted >= PENDING_WRITE {
            self.write_pending()?;
        }
        Ok(())
    }

    /// Keeps the first `keep` entries.
    pub fn truncate(&mut self, keep: usize) -> io::Result<()> {
        if keep < self.persisted {
            OpenOptions::new().write(true).open(&self.path)?.set_len((keep * E::LEN) as u64)?;
            self.persisted = keep;
            self.unsynced = true;
        }
        self.entries.truncate(keep);
        Ok(())
    }

    /// Writes the entries not yet in the file, with one write.
    pub fn write_pending(&mut self) -> io::Result<()> {
        if self.persisted == self.entries.len() {
            return Ok(());
        }
        let pending = &self.entries[self.persisted..];
        let mut buf = Vec::with_capacity(pending.len() * E::LEN);
        for e in pending {
            e.encode(&mut buf);
        }
        OpenOptions::new().append(true).open(&self.path)?.write_all(&buf)?;
        self.persisted = self.entries.len();
        self.unsynced = true;
        Ok(())
    }

    /// Whether [`Self::flush`] has anything to do.
    pub fn is_dirty(&self) -> bool {
        self.unsynced || self.persisted != self.entries.len()
    }

    pub fn flush(&mut self) -> io::Result<()> {
        if !self.is_dirty() {
            return Ok(());
        }
        self.write_pending()?;
        File::open(&self.path)?.sync_data().map_err(super::error::fsync_failed)?;
        self.unsynced = false;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Offset index entries: (relative offset, position).
impl Entry for (u32, u32) {
    const LEN: usize = 8;
    fn encode(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0.to_be_bytes());
        out.extend_from_slice(&self.1.to_be_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        (u32::from_be_bytes([b[0], b[1], b[2], b[3]]), u32::from_be_bytes([b[4], b[5], b[6], b[7]]))
    }
}

/// Time index entries: (timestamp, relative offset).
impl Entry for (i64, u32) {
    const LEN: usize = 12;
    fn encode(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0.to_be_bytes());
        out.extend_from_slice(&self.1.to_be_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&b[..8]);
        (i64::from_be_bytes(ts), u32::from_be_bytes([b[8], b[9], b[10], b[11]]))
    }
}
