//! The leader epoch cache of a partition (`leader-epoch-checkpoint`).

use std::io;
use std::path::{Path, PathBuf};

use super::checkpoint::CheckpointFile;
use super::error::StorageError;

/// Start offset of each leader epoch present in the log, for OffsetForLeaderEpoch.
///
/// Persisted as a [`CheckpointFile`] with one `epoch start_offset` entry per line, the same
/// file Kafka keeps per partition. Invariant: epochs and start offsets both strictly
/// increase; every start offset is within `[log start offset, log end offset]`. The file is
/// rewritten on every change (changes are rare: a new leader, a truncation, retention).
#[derive(Debug)]
pub struct LeaderEpochCache {
    path: PathBuf,
    entries: Vec<(i32, i64)>,
}

pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";

impl LeaderEpochCache {
    /// Loads the checkpoint in `dir`; a corrupt or unordered file is reported and dropped.
    pub fn load(dir: &Path) -> Result<LeaderEpochCache, StorageError> {
        let path = dir.join(LEADER_EPOCH_CHECKPOINT);
        let entries = match CheckpointFile::read(&path, 2) {
            Ok(Some(lines)) => {
                let entries: Vec<(i32, i64)> =
                    lines.iter().filter_map(|l| Some((i32::try_from(l[0]).ok()?, l[1]))).collect();
                let ordered =
                    entries.len() == lines.len() && entries.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1);
                if ordered {
                    entries
                } else {
                    tracing::warn!(path = %path.display(), "ignoring unordered leader epoch checkpoint");
                    Vec::new()
                }
            }
            Ok(None) => Vec::new(),
            Err(StorageError::Corrupt { path, reason }) => {
                tracing::warn!(path = %path.display(), %reason, "ignoring corrupt leader epoch checkpoint");
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        Ok(LeaderEpochCache { path, entries })
    }

    fn persist(&self) -> io::Result<()> {
        let lines: Vec<Vec<i64>> = self.entries.iter().map(|&(e, o)| vec![i64::from(e), o]).collect();
        CheckpointFile::write(&self.path, &lines)
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|&(e, _)| e)
    }

    pub fn entries(&self) -> &[(i32, i64)] {
        &self.entries
    }

    /// Records that `epoch` starts at `start_offset`. Ignored unless `epoch` is newer than
    /// the latest; entries starting at or after `start_offset` are replaced.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> io::Result<()> {
        if self.latest_epoch().is_some_and(|latest| latest >= epoch) {
            return Ok(());
        }
        self.entries.retain(|&(_, start)| start < start_offset);
        self.entries.push((epoch, start_offset));
        self.persist()
    }

    /// Forgets epochs starting at or after `end_offset` (the log was truncated there).
    pub fn truncate_from_end(&mut self, end_offset: i64) -> io::Result<()> {
        let keep = self.entries.partition_point(|&(_, start)| start < end_offset);
        if keep == self.entries.len() {
            return Ok(());
        }
        self.entries.truncate(keep);
        self.persist()
    }

    /// The log now starts at `start_offset`: the epoch covering it starts there, and
    /// earlier epochs are forgotten.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> io::Result<()> {
        let below = self.entries.partition_point(|&(_, start)| start < start_offset);
        if below == 0 {
            return Ok(());
        }
        let covering = self.entries[below - 1].0;
        self.entries.drain(..below);
        // Remaining entries start at or after `start_offset`.
        if self.entries.first().is_none_or(|&(_, start)| start != start_offset) {
            self.entries.insert(0, (covering, start_offset));
        }
        self.persist()
    }

    pub fn clear(&mut self) -> io::Result<()> {
        self.entries.clear();
        self.persist()
    }

    /// OffsetForLeaderEpoch: the largest epoch ≤ `epoch` and the offset where the next
    /// epoch starts (the log end offset for the latest epoch). `None` when `epoch` is newer
    /// than every known epoch or no epoch is known. An `epoch` older than the first known
    /// one answers `(epoch, first start offset)`, as Kafka does.
    pub fn end_offset_for(&self, epoch: i32, log_end_offset: i64) -> Option<(i32, i64)> {
        let latest = self.latest_epoch()?;
        if epoch == latest {
            return Some((latest, log_end_offset));
        }
        let higher = self.entries.partition_point(|&(e, _)| e <= epoch);
        let &(_, next_start) = self.entries.get(higher)?;
        match higher.checked_sub(1) {
            Some(floor) => Some((self.entries[floor].0, next_start)),
            None => Some((epoch, next_start)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assign_lookup_truncate_and_persist() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochCache::load(dir.path()).unwrap();
        assert_eq!(cache.end_offset_for(0, 0), None);
        cache.assign(1, 0).unwrap();
        cache.assign(1, 5).unwrap(); // same epoch: no-op
        cache.assign(3, 10).unwrap();
        cache.assign(5, 20).unwrap();
        assert_eq!(cache.end_offset_for(5, 30), Some((5, 30)));
        assert_eq!(cache.end_offset_for(4, 30), Some((3, 20)));
        assert_eq!(cache.end_offset_for(1, 30), Some((1, 10)));
        assert_eq!(cache.end_offset_for(0, 30), Some((0, 0)));
        assert_eq!(cache.end_offset_for(6, 30), None);

        let reloaded = LeaderEpochCache::load(dir.path()).unwrap();
        assert_eq!(reloaded.entries(), &[(1, 0), (3, 10), (5, 20)]);

        cache.truncate_from_end(20).unwrap();
        assert_eq!(cache.entries(), &[(1, 0), (3, 10)]);
        cache.truncate_from_start(12).unwrap();
        assert_eq!(cache.entries(), &[(3, 12)]);
        assert_eq!(LeaderEpochCache::load(dir.path()).unwrap().entries(), &[(3, 12)]);
    }
}
