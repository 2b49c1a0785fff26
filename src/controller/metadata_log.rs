//! The metadata log on disk: `<data-dir>/__cluster_metadata-0/metadata.log`.
//!
//! Bytes on disk: a sequence of entries, each `length: u32 BE | crc32c: u32 BE | payload`,
//! where the payload is one JSON-encoded [`MetadataRecord`] of `length` bytes and the CRC
//! covers the payload. Invariant: every entry before the end of the file was fsynced
//! before the change it records was acknowledged; on open, a torn or corrupt tail (a
//! crash during append) is truncated, since nothing after it was ever acknowledged.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::records::MetadataRecord;
use super::ControllerError;

const ENTRY_HEADER: usize = 8;
/// No metadata record comes near this; a larger length is corruption.
const MAX_ENTRY: usize = 1 << 20;

pub struct MetadataLog {
    path: PathBuf,
    file: File,
}

impl MetadataLog {
    /// Open (creating if missing) and return the records it holds.
    pub fn open(dir: &Path) -> Result<(MetadataLog, Vec<MetadataRecord>), ControllerError> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("metadata.log");
        let mut file = OpenOptions::new().read(true).append(true).create(true).open(&path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let mut records = Vec::new();
        let mut pos = 0usize;
        while pos < bytes.len() {
            match decode_entry(&bytes[pos..], MAX_ENTRY) {
                Some((record, used)) => {
                    records.push(record);
                    pos += used;
                }
                None => {
                    tracing::warn!(
                        path = %path.display(), valid_bytes = pos, file_bytes = bytes.len(),
                        "truncating torn or corrupt tail of the metadata log"
                    );
                    file.set_len(pos as u64)?;
                    file.sync_all()?;
                    break;
                }
            }
        }
        file.seek(SeekFrom::End(0))?;
        Ok((MetadataLog { path, file }, records))
    }

    /// Append records durably (one write, one fsync) before returning.
    pub fn append(&mut self, records: &[MetadataRecord]) -> Result<(), ControllerError> {
        let mut buf = Vec::new();
        for r in records {
            encode_entry(&mut buf, r).map_err(|e| ControllerError::Internal(e.to_string()))?;
        }
        let before = self.file.metadata()?.len();
        if let Err(e) = self.file.write_all(&buf).and_then(|_| self.file.sync_data()) {
            // Leave no half entry behind; the caller reports the failure.
            let _ = self.file.set_len(before);
            return Err(e.into());
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Appends one entry framed as this file's doc says: `length | crc32c | JSON payload`.
/// The Raft log (`raft/log_store.rs`) frames its entries the same way.
pub(crate) fn encode_entry<T: Serialize>(buf: &mut Vec<u8>, value: &T) -> serde_json::Result<()> {
    let payload = serde_json::to_vec(value)?;
    buf.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    buf.extend_from_slice(&crc32c::crc32c(&payload).to_be_bytes());
    buf.extend_from_slice(&payload);
    Ok(())
}

/// The entry at the start of `buf` and the bytes it takes; `None` for a torn or corrupt
/// entry, or one longer than `max_len`.
pub(crate) fn decode_entry<T: DeserializeOwned>(buf: &[u8], max_len: usize) -> Option<(T, usize)> {
    if buf.len() < ENTRY_HEADER {
        return None;
    }
    let len = u32::from_be_bytes(buf[0..4].try_into().ok()?) as usize;
    let crc = u32::from_be_bytes(buf[4..8].try_into().ok()?);
    if len > max_len || buf.len() < ENTRY_HEADER + len {
        return None;
    }
    let payload = &buf[ENTRY_HEADER..ENTRY_HEADER + len];
    if crc32c::crc32c(payload) != crc {
        return None;
    }
    Some((serde_json::from_slice(payload).ok()?, ENTRY_HEADER + len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_reopen_and_truncate_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let r1 = MetadataRecord::Cluster { cluster_id: "abc".into() };
        let r2 = MetadataRecord::ProducerIds { next_producer_id: 1000 };
        {
            let (mut log, recs) = MetadataLog::open(dir.path()).unwrap();
            assert!(recs.is_empty());
            log.append(&[r1.clone(), r2.clone()]).unwrap();
        }
        let path = dir.path().join("metadata.log");
        let good_len = std::fs::metadata(&path).unwrap().len();
        // A torn append: a header promising more bytes than were written.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[0, 0, 0, 50, 1, 2, 3, 4, b'{']).unwrap();
        drop(f);
        let (mut log, recs) = MetadataLog::open(dir.path()).unwrap();
        assert_eq!(recs, vec![r1.clone(), r2.clone()]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), good_len);
        log.append(std::slice::from_ref(&r1)).unwrap();
        drop(log);
        let (_, recs) = MetadataLog::open(dir.path()).unwrap();
        assert_eq!(recs.len(), 3);
    }

    #[test]
    fn corrupt_entry_stops_replay() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut log, _) = MetadataLog::open(dir.path()).unwrap();
            log.append(&[MetadataRecord::Cluster { cluster_id: "a".into() }]).unwrap();
            log.append(&[MetadataRecord::Cluster { cluster_id: "b".into() }]).unwrap();
        }
        let path = dir.path().join("metadata.log");
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 3;
        bytes[last] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let (_, recs) = MetadataLog::open(dir.path()).unwrap();
        assert_eq!(recs, vec![MetadataRecord::Cluster { cluster_id: "a".into() }]);
    }
}
