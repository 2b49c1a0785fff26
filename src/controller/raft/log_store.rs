//! The Raft log and hard state on disk, under `<data-dir>/__cluster_metadata-0/raft/`.
//!
//! Bytes on disk:
//!
//! * `log`: a sequence of entries, each `length: u32 BE | crc32c: u32 BE | payload`, the
//!   payload one JSON-encoded openraft `Entry` (log id + [`Commit`](super::Commit) or
//!   membership) of `length` bytes, the CRC over the payload (the framing of
//!   `metadata_log.rs`). Indexes are consecutive.
//! * `state.json`: `{vote, committed, last_purged}`, replaced atomically (temporary file,
//!   fsync, rename, fsync of the directory).
//!
//! Invariants: an append is written and fsynced before openraft is told it is durable,
//! so a torn or corrupt tail holds nothing a leader counted; on open it is truncated.
//! Entries at or below `last_purged` (compacted into a snapshot) are dropped on open, so
//! a crash between saving `last_purged` and rewriting `log` loses nothing.
//!
//! The whole log is held in memory too: metadata logs are small and compacted by
//! snapshots. I/O is synchronous (small writes plus one fsync) on the calling task.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{Entry, LogId, RaftLogReader, RaftTypeConfig, Vote};
use serde::{Deserialize, Serialize};

use super::{io_err, read_err, replace_file, NodeId, StorageError, TypeConfig};
use crate::controller::metadata_log::{decode_entry, encode_entry};

/// A larger length is corruption: one commit is at most a CreateTopics of
/// `MAX_PARTITIONS` partitions, a few MiB of JSON.
const MAX_ENTRY: usize = 64 << 20;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct HardState {
    vote: Option<Vote<NodeId>>,
    committed: Option<LogId<NodeId>>,
    last_purged: Option<LogId<NodeId>>,
}

struct Inner {
    dir: PathBuf,
    file: File,
    /// index → (entry, byte position of its frame in `log`).
    entries: BTreeMap<u64, (Entry<TypeConfig>, u64)>,
    end: u64,
    state: HardState,
}

/// The log store; clones share one log (openraft's reader is a clone).
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Mutex<Inner>>,
}

impl LogStore {
    /// Open (creating if missing) the log in `dir`, truncating a torn tail.
    pub fn open(dir: &Path) -> std::io::Result<LogStore> {
        std::fs::create_dir_all(dir)?;
        let state = match std::fs::read(dir.join("state.json")) {
            Ok(b) => serde_json::from_slice(&b).map_err(std::io::Error::other)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => HardState::default(),
            Err(e) => return Err(e),
        };
        let path = dir.join("log");
        let mut file = OpenOptions::new().read(true).append(true).create(true).open(&path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let mut entries = BTreeMap::new();
        let mut pos = 0usize;
        while pos < bytes.len() {
            let Some((entry, used)) = decode_entry::<Entry<TypeConfig>>(&bytes[pos..], MAX_ENTRY) else {
                tracing::warn!(
                    path = %path.display(), valid_bytes = pos, file_bytes = bytes.len(),
                    "truncating torn or corrupt tail of the controller's Raft log"
                );
                file.set_len(pos as u64)?;
                file.sync_all()?;
                break;
            };
            if state.last_purged.is_none_or(|p| entry.log_id.index > p.index) {
                entries.insert(entry.log_id.index, (entry, pos as u64));
            }
            pos += used;
        }
        let end = file.metadata()?.len();
        Ok(LogStore { inner: Arc::new(Mutex::new(Inner { dir: dir.to_owned(), file, entries, end, state })) })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The committed log id saved last (for a caller that waits until it is applied).
    pub fn committed(&self) -> Option<LogId<NodeId>> {
        self.lock().state.committed
    }

    /// Whether anything was ever written: a vote or an entry. A node with neither has
    /// not joined a cluster yet.
    pub fn is_pristine(&self) -> bool {
        let inner = self.lock();
        inner.state.vote.is_none() && inner.entries.is_empty() && inner.state.last_purged.is_none()
    }
}

impl Inner {
    fn save_state(&self) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(&self.state).map_err(std::io::Error::other)?;
        replace_file(&self.dir.join("state.json"), &bytes)
    }

    fn append(&mut self, entries: Vec<Entry<TypeConfig>>) -> std::io::Result<()> {
        let mut buf = Vec::new();
        let mut positions = Vec::with_capacity(entries.len());
        for e in &entries {
            positions.push(self.end + buf.len() as u64);
            encode_entry(&mut buf, e).map_err(std::io::Error::other)?;
        }
        if let Err(e) = self.file.write_all(&buf).and_then(|_| self.file.sync_data()) {
            // Leave no half entry behind.
            let _ = self.file.set_len(self.end);
            return Err(e);
        }
        self.end += buf.len() as u64;
        for (e, pos) in entries.into_iter().zip(positions) {
            self.entries.insert(e.log_id.index, (e, pos));
        }
        Ok(())
    }

    /// Drop entries at and after `index`.
    fn truncate(&mut self, index: u64) -> std::io::Result<()> {
        let Some(pos) = self.entries.range(index..).next().map(|(_, (_, pos))| *pos) else {
            return Ok(());
        };
        self.file.set_len(pos)?;
        self.file.sync_data()?;
        self.end = pos;
        self.entries.split_off(&index);
        Ok(())
    }

    /// Drop entries up to and including `log_id`: first record it (so a crash cannot
    /// bring them back), then rewrite the file without them.
    fn purge(&mut self, log_id: LogId<NodeId>) -> std::io::Result<()> {
        self.state.last_purged = Some(log_id);
        self.save_state()?;
        self.entries = self.entries.split_off(&(log_id.index + 1));
        let path = self.dir.join("log");
        let mut buf = Vec::new();
        for (e, pos) in self.entries.values_mut() {
            *pos = buf.len() as u64;
            encode_entry(&mut buf, e).map_err(std::io::Error::other)?;
        }
        replace_file(&path, &buf)?;
        self.file = OpenOptions::new().read(true).append(true).open(&path)?;
        self.end = buf.len() as u64;
        Ok(())
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError> {
        Ok(self.lock().entries.range(range).map(|(_, (e, _))| e.clone()).collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let inner = self.lock();
        let last_purged_log_id = inner.state.last_purged;
        let last_log_id = inner.entries.values().next_back().map(|(e, _)| e.log_id).or(last_purged_log_id);
        Ok(LogState { last_purged_log_id, last_log_id })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError> {
        let mut inner = self.lock();
        inner.state.vote = Some(*vote);
        inner.save_state().map_err(|e| openraft::StorageIOError::write_vote(&e).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError> {
        Ok(self.lock().state.vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> Result<(), StorageError> {
        let mut inner = self.lock();
        inner.state.committed = committed;
        inner.save_state().map_err(io_err)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError> {
        Ok(self.lock().state.committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = <TypeConfig as RaftTypeConfig>::Entry> + Send,
        I::IntoIter: Send,
    {
        let result = self.lock().append(entries.into_iter().collect());
        match result {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let storage = openraft::StorageIOError::write_logs(&e).into();
                callback.log_io_completed(Err(e));
                Err(storage)
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError> {
        self.lock().truncate(log_id.index).map_err(io_err)
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError> {
        self.lock().purge(log_id).map_err(read_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::raft::Commit;
    use crate::controller::MetadataRecord;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(index: u64) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Normal(Commit {
                records: vec![MetadataRecord::ProducerIds { next_producer_id: index as i64 }],
            }),
        }
    }

    #[test]
    fn torn_tail_is_truncated_and_purge_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = LogStore::open(dir.path()).unwrap();
            store.lock().append((1..=4).map(entry).collect()).unwrap();
        }
        let path = dir.path().join("log");
        let good = std::fs::metadata(&path).unwrap().len();
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[0, 0, 0, 80, 9, 9, 9, 9, b'{']).unwrap();
        drop(f);
        let store = LogStore::open(dir.path()).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), good);
        assert_eq!(store.lock().entries.len(), 4);
        store.lock().truncate(4).unwrap();
        store.lock().purge(entry(2).log_id).unwrap();
        store.lock().append(vec![entry(4)]).unwrap();
        drop(store);
        let store = LogStore::open(dir.path()).unwrap();
        let indexes: Vec<u64> = store.lock().entries.keys().copied().collect();
        assert_eq!(indexes, vec![3, 4]);
        assert_eq!(store.lock().state.last_purged, Some(entry(2).log_id));
    }
}
