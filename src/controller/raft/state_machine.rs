//! The metadata image as openraft's state machine.
//!
//! Applying an entry applies its commit's records to the image, publishes the new image
//! and tells every [`MetadataListener`] (`on_commit`), one commit at a time, in log
//! order, on a blocking thread (listeners open and delete partition files).
//!
//! The state machine is not persisted by itself: on open it is the last snapshot (or,
//! with none, the base image a caller gives: the records of a pre-Raft
//! `metadata.log`), and openraft re-applies the committed entries after it.
//!
//! Bytes on disk: `snapshot.json` = `{meta, offset, records}` (openraft's snapshot meta,
//! the image's metadata offset, and the records that rebuild the image), replaced
//! atomically. A snapshot's bytes on the wire are the JSON of `{offset, records}`.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    Entry, EntryPayload, LogId, RaftSnapshotBuilder, RaftTypeConfig, SnapshotMeta, StorageIOError, StoredMembership,
};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::{io_err, read_err, replace_file, ControllerNode, NodeId, StorageError, TypeConfig};
use crate::controller::delta::{MetadataDelta, MetadataListener};
use crate::controller::image::MetadataImage;
use crate::controller::records::MetadataRecord;

/// What the state machine shows the rest of the broker: the latest applied image, the
/// listeners told of each commit, and the last applied log index (to wait on).
pub struct Published {
    /// Held while an image is published to listeners, and while a listener joins: a
    /// joining listener sees either the image before a commit and then that commit, or
    /// the image after it, never a commit out of order with its first image.
    publishing: Mutex<()>,
    image: RwLock<Arc<MetadataImage>>,
    listeners: RwLock<Vec<Arc<dyn MetadataListener>>>,
    applied: watch::Sender<u64>,
}

impl Published {
    pub fn new(image: MetadataImage) -> Published {
        Published {
            publishing: Mutex::new(()),
            image: RwLock::new(Arc::new(image)),
            listeners: RwLock::new(Vec::new()),
            applied: watch::Sender::new(0),
        }
    }

    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn subscribe(&self, listener: Arc<dyn MetadataListener>) {
        self.listeners.write().unwrap_or_else(|e| e.into_inner()).push(listener);
    }

    /// Run `init` on the current image and subscribe `listener` to every commit after
    /// it, with no commit slipping in between.
    pub fn subscribe_from<R>(
        &self,
        listener: Arc<dyn MetadataListener>,
        init: impl FnOnce(&Arc<MetadataImage>) -> R,
    ) -> R {
        let _turn = self.publishing.lock().unwrap_or_else(|e| e.into_inner());
        let result = init(&self.image());
        self.subscribe(listener);
        result
    }

    pub fn listeners(&self) -> Vec<Arc<dyn MetadataListener>> {
        self.listeners.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The last applied log index, to wait on.
    pub fn applied(&self) -> watch::Receiver<u64> {
        self.applied.subscribe()
    }

    fn publish(&self, image: Arc<MetadataImage>, delta: &MetadataDelta) {
        let _turn = self.publishing.lock().unwrap_or_else(|e| e.into_inner());
        *self.image.write().unwrap_or_else(|e| e.into_inner()) = image.clone();
        for l in self.listeners() {
            l.on_commit(&image, delta);
        }
    }
}

#[derive(Serialize, Deserialize)]
struct SnapshotBody {
    offset: u64,
    records: Vec<MetadataRecord>,
}

#[derive(Serialize, Deserialize)]
struct SnapshotFile {
    meta: SnapshotMeta<NodeId, ControllerNode>,
    #[serde(flatten)]
    body: SnapshotBody,
}

#[derive(Clone)]
struct StoredSnapshot {
    meta: SnapshotMeta<NodeId, ControllerNode>,
    data: Vec<u8>,
}

pub struct StateMachine {
    dir: PathBuf,
    image: Arc<MetadataImage>,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, ControllerNode>,
    current: Arc<Mutex<Option<StoredSnapshot>>>,
    published: Arc<Published>,
}

impl StateMachine {
    /// Open the state machine in `dir`: the stored snapshot if there is one, else `base`.
    /// `published` is set to the result.
    pub fn open(dir: &Path, base: MetadataImage, published: Arc<Published>) -> std::io::Result<StateMachine> {
        std::fs::create_dir_all(dir)?;
        let mut sm = StateMachine {
            dir: dir.to_owned(),
            image: Arc::new(base),
            last_applied: None,
            membership: StoredMembership::default(),
            current: Arc::default(),
            published,
        };
        match std::fs::read(dir.join("snapshot.json")) {
            Ok(bytes) => {
                let file: SnapshotFile = serde_json::from_slice(&bytes).map_err(std::io::Error::other)?;
                sm.image = Arc::new(MetadataImage::from_records(&file.body.records, file.body.offset));
                sm.last_applied = file.meta.last_log_id;
                sm.membership = file.meta.last_membership.clone();
                let data = serde_json::to_vec(&file.body).map_err(std::io::Error::other)?;
                *sm.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(StoredSnapshot { meta: file.meta, data });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        *sm.published.image.write().unwrap_or_else(|e| e.into_inner()) = sm.image.clone();
        sm.published.applied.send_replace(sm.last_applied.map_or(0, |l| l.index));
        Ok(sm)
    }
}

/// Builds a snapshot of the image as it was when the builder was made.
pub struct SnapshotBuilder {
    dir: PathBuf,
    image: Arc<MetadataImage>,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, ControllerNode>,
    current: Arc<Mutex<Option<StoredSnapshot>>>,
}

fn save_snapshot(
    dir: &Path,
    meta: &SnapshotMeta<NodeId, ControllerNode>,
    body: SnapshotBody,
) -> std::io::Result<Vec<u8>> {
    let file = SnapshotFile { meta: meta.clone(), body };
    replace_file(&dir.join("snapshot.json"), &serde_json::to_vec(&file).map_err(std::io::Error::other)?)?;
    serde_json::to_vec(&file.body).map_err(std::io::Error::other)
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let snapshot_id = match self.last_applied {
            Some(l) => format!("{}-{}-{}", l.leader_id, l.index, self.image.offset),
            None => format!("--{}", self.image.offset),
        };
        let meta =
            SnapshotMeta { last_log_id: self.last_applied, last_membership: self.membership.clone(), snapshot_id };
        let body = SnapshotBody { offset: self.image.offset, records: self.image.to_records() };
        let data = save_snapshot(&self.dir, &meta, body)
            .map_err(|e| StorageError::from(StorageIOError::write_snapshot(Some(meta.signature()), &e)))?;
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(StoredSnapshot { meta: meta.clone(), data: data.clone() });
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(data)) })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, ControllerNode>), StorageError> {
        Ok((self.last_applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<()>, StorageError>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut replies = Vec::new();
        let mut commits = Vec::new();
        for entry in entries {
            self.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(commit) => {
                    let mut image = (*self.image).clone();
                    for r in &commit.records {
                        image.apply(r);
                    }
                    self.image = Arc::new(image);
                    commits.push((self.image.clone(), MetadataDelta::of(&commit.records)));
                }
                EntryPayload::Membership(m) => {
                    self.membership = StoredMembership::new(Some(entry.log_id), m);
                }
            }
            replies.push(());
        }
        if !commits.is_empty() {
            let published = self.published.clone();
            tokio::task::spawn_blocking(move || {
                for (image, delta) in commits {
                    published.publish(image, &delta);
                }
            })
            .await
            .map_err(|e| StorageError::from(StorageIOError::write_state_machine(&e)))?;
        }
        self.published.applied.send_replace(self.last_applied.map_or(0, |l| l.index));
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            dir: self.dir.clone(),
            image: self.image.clone(),
            last_applied: self.last_applied,
            membership: self.membership.clone(),
            current: self.current.clone(),
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<<TypeConfig as RaftTypeConfig>::SnapshotData>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, ControllerNode>,
        snapshot: Box<<TypeConfig as RaftTypeConfig>::SnapshotData>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let body: SnapshotBody = serde_json::from_slice(&data)
            .map_err(|e| StorageError::from(StorageIOError::read_snapshot(Some(meta.signature()), &e)))?;
        let image = Arc::new(MetadataImage::from_records(&body.records, body.offset));
        save_snapshot(&self.dir, meta, body).map_err(io_err)?;
        // What changed, as far as listeners are concerned: everything in the new image,
        // and every topic the old one had that the new one lacks.
        let mut delta = MetadataDelta::everything(&image);
        for t in self.image.topics.values() {
            if image.topic_by_id(&t.topic_id).is_none() {
                delta.removed_topics.insert(t.topic_id);
            }
        }
        self.image = image.clone();
        self.last_applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(StoredSnapshot { meta: meta.clone(), data });
        let published = self.published.clone();
        tokio::task::spawn_blocking(move || published.publish(image, &delta)).await.map_err(read_err)?;
        self.published.applied.send_replace(self.last_applied.map_or(0, |l| l.index));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let current = self.current.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Ok(current.map(|s| Snapshot { meta: s.meta, snapshot: Box::new(Cursor::new(s.data)) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::raft::log_store::LogStore;
    use openraft::testing::{StoreBuilder, Suite};

    struct Builder;

    impl StoreBuilder<TypeConfig, LogStore, StateMachine, tempfile::TempDir> for Builder {
        async fn build(&self) -> Result<(tempfile::TempDir, LogStore, StateMachine), StorageError> {
            let dir = tempfile::tempdir().map_err(io_err)?;
            let log = LogStore::open(&dir.path().join("raft")).map_err(io_err)?;
            let published = Arc::new(Published::new(MetadataImage::default()));
            let sm =
                StateMachine::open(&dir.path().join("raft"), MetadataImage::default(), published).map_err(io_err)?;
            Ok((dir, log, sm))
        }
    }

    /// openraft's storage conformance suite against the durable log store and the image
    /// state machine.
    #[test]
    fn openraft_storage_suite() {
        Suite::test_all(Builder).unwrap();
    }
}
