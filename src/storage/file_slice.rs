//! Record bytes that stay in the log's files until they are sent.
//!
//! A read is planned under the partition's lock (which batches, where) and carried out
//! after it: the plan is a list of [`FileSlice`]s, each a byte range of one segment's
//! `.log` held by its own file handle. Bytes below the high watermark never change in
//! place (appends go past them, truncation only cuts above it, and the cleaner and
//! retention replace or unlink whole files, which an open handle still reads), so a plan
//! stays valid after the lock is released.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;

/// `len` bytes of a segment's `.log` from `pos`: whole record batches.
#[derive(Debug, Clone)]
pub struct FileSlice {
    file: Arc<File>,
    pos: u64,
    len: usize,
}

impl FileSlice {
    pub fn new(file: Arc<File>, pos: u64, len: usize) -> FileSlice {
        FileSlice { file, pos, len }
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    pub fn pos(&self) -> u64 {
        self.pos
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies the bytes into `buf` (exactly `len` of them).
    pub fn read_into(&self, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, self.pos)
    }
}

/// The record bytes of one partition's read: whole batches, possibly from several
/// segments, in offset order.
#[derive(Debug, Clone, Default)]
pub struct LogSlices {
    slices: Vec<FileSlice>,
}

impl LogSlices {
    pub fn push(&mut self, slice: FileSlice) {
        if !slice.is_empty() {
            self.slices.push(slice);
        }
    }

    /// Total bytes.
    pub fn len(&self) -> usize {
        self.slices.iter().map(FileSlice::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.slices.is_empty()
    }

    pub fn slices(&self) -> &[FileSlice] {
        &self.slices
    }

    /// The bytes, copied into one buffer: for callers that parse them (the coordinator's
    /// replay, tests) or a response encoded by the codec.
    pub fn read(&self) -> io::Result<Bytes> {
        let mut out = vec![0u8; self.len()];
        let mut at = 0;
        for s in &self.slices {
            s.read_into(&mut out[at..at + s.len])?;
            at += s.len;
        }
        Ok(Bytes::from(out))
    }
}
