//! The high watermark across restarts, as Kafka keeps it: every
//! [`HIGH_WATERMARK_CHECKPOINT_INTERVAL`] (Kafka's `replica.high.watermark.checkpoint.interval.ms`)
//! and at shutdown, each log directory's `replication-offset-checkpoint` is rewritten
//! with the high watermark of every partition it holds; a partition opened after a
//! restart starts from it (capped at its log end offset) instead of its log start
//! offset. Without it a restarted replica exposed nothing to consumers until a fetch
//! round had passed: as a follower (consumers reading from followers, KIP-392) until the
//! leader's first answer, and as a leader with other ISR members (the moments after a
//! restart before the controller fences it and shrinks the ISR, or a hand-made image in
//! tests) until every ISR member had fetched, or the controller dropped a dead one.
//!
//! A checkpointed value is always safe to start from: it is a high watermark this broker
//! knew, so every record below it was in every in-sync replica's log when it was written
//! (records are never truncated below a high watermark). The file is keyed by topic name,
//! as Kafka's is: an entry is used once, by the first partition of that name opened. So
//! that a topic deleted and created again cannot inherit the old topic's entry, a
//! deleted partition's entry is dropped from memory and the files are rewritten at once
//! (not at the next interval), and a file left from before the restart is rewritten at
//! the first pass even when its directory holds no partition any more.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use super::ReplicaManager;
use crate::replication::partition::Partition;
use crate::storage::checkpoint::{CheckpointFile, PartitionOffset};
use crate::storage::log_dirs::LogDirs;
use crate::storage::StorageError;

/// Kafka's file name, in each log directory.
pub const HIGH_WATERMARK_CHECKPOINT_FILE: &str = "replication-offset-checkpoint";

/// Kafka's `replica.high.watermark.checkpoint.interval.ms` default.
pub const HIGH_WATERMARK_CHECKPOINT_INTERVAL: Duration = Duration::from_millis(5_000);

#[derive(Default)]
pub(super) struct HighWatermarkCheckpoints {
    /// (topic, partition) → the high watermark read at start, until that partition opens.
    recovered: Mutex<HashMap<(String, i32), i64>>,
    /// Per log directory, what this process last wrote there (so an idle broker rewrites
    /// nothing). Held for a whole pass: one writer of the files at a time.
    written: Mutex<HashMap<usize, Vec<PartitionOffset>>>,
    /// Signalled when a partition directory is deleted: rewrite now.
    deleted: tokio::sync::Notify,
}

impl HighWatermarkCheckpoints {
    /// Reads every log directory's checkpoint, keeping an entry only from the directory
    /// that now holds the partition. A corrupt or unreadable file is logged and ignored:
    /// its partitions start from their log start offsets, as before checkpoints.
    pub(super) fn load(log_dirs: &LogDirs) -> HighWatermarkCheckpoints {
        let mut recovered = HashMap::new();
        for (i, dir) in log_dirs.dirs().iter().enumerate() {
            let path = dir.join(HIGH_WATERMARK_CHECKPOINT_FILE);
            let entries = match CheckpointFile::read_partition_offsets(&path) {
                Ok(entries) => entries.unwrap_or_default(),
                Err(e) => {
                    let reason = match &e {
                        StorageError::Corrupt { reason, .. } => reason.clone(),
                        other => other.to_string(),
                    };
                    tracing::warn!(path = %path.display(), %reason, "ignoring the high watermark checkpoint");
                    continue;
                }
            };
            for e in entries {
                if log_dirs.index_holding(&format!("{}-{}", e.topic, e.partition)) == Some(i) {
                    recovered.insert((e.topic, e.partition), e.offset);
                }
            }
        }
        HighWatermarkCheckpoints { recovered: Mutex::new(recovered), ..HighWatermarkCheckpoints::default() }
    }
}

impl ReplicaManager {
    /// A partition just opened takes its checkpointed high watermark, if any (once).
    pub(super) fn restore_high_watermark(&self, p: &Partition) {
        let hw = lock(&self.hw_checkpoints.recovered).remove(&(p.topic.clone(), p.index));
        if let Some(hw) = hw {
            p.restore_high_watermark(hw);
        }
    }

    /// A partition directory `name` (`<topic>-<partition>`) is being deleted: its entry
    /// goes, and the next [`checkpoint_high_watermarks`](Self::checkpoint_high_watermarks)
    /// is due at once.
    pub(super) fn forget_high_watermark(&self, name: &str) {
        if let Some((topic, partition)) = name.rsplit_once('-') {
            if let Ok(partition) = partition.parse::<i32>() {
                lock(&self.hw_checkpoints.recovered).remove(&(topic.to_owned(), partition));
            }
        }
        self.hw_checkpoints.deleted.notify_one();
    }

    /// Resolves when a partition directory was deleted since the last call (the
    /// checkpoints still name it).
    pub async fn high_watermark_checkpoint_due(&self) {
        self.hw_checkpoints.deleted.notified().await;
    }

    /// Rewrites the checkpoint of every log directory whose partitions' high watermarks
    /// changed since the last write (blocking: it fsyncs). A directory that cannot be
    /// written is logged and tried again next time; nothing else depends on it.
    pub fn checkpoint_high_watermarks(&self) {
        let mut written = lock(&self.hw_checkpoints.written);
        let mut by_dir: HashMap<usize, Vec<PartitionOffset>> = HashMap::new();
        for p in self.all_partitions() {
            let Some(i) = self.log_dirs.index_of_partition_dir(&p.dir()) else { continue };
            if self.log_dirs.is_offline(i) || p.is_deleted() {
                continue;
            }
            let offset = p.high_watermark_to_checkpoint();
            by_dir.entry(i).or_default().push(PartitionOffset { topic: p.topic.clone(), partition: p.index, offset });
        }
        for i in 0..self.log_dirs.dirs().len() {
            if self.log_dirs.is_offline(i) {
                continue;
            }
            let mut entries = by_dir.remove(&i).unwrap_or_default();
            entries.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
            let path = self.log_dirs.dirs()[i].join(HIGH_WATERMARK_CHECKPOINT_FILE);
            let unchanged = match written.get(&i) {
                Some(last) => *last == entries,
                // Nothing written yet by this process: an empty directory needs no file,
                // unless one is left from before (naming partitions that are gone).
                None => entries.is_empty() && !path.exists(),
            };
            if unchanged {
                continue;
            }
            match CheckpointFile::write_partition_offsets(&path, &entries) {
                Ok(()) => {
                    written.insert(i, entries);
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot write the high watermark checkpoint")
                }
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
