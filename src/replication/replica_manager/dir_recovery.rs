//! A log directory that went offline for a cause that clears by itself (its filesystem
//! full, a quota reached: see `DirHealth::can_recover`) comes back without a restart.
//! Every [`LOG_DIR_PROBE_INTERVAL`] the broker probes it (`LogDirs::probe`: a write and
//! an fsync); once the probe passes, each partition in it reopens its log from its files
//! (`Partition::reopen_log`) and the directory serves again. Before, the data in it was
//! unreadable until a restart even after space was freed (as in Kafka).
//!
//! In a cluster the controller moved its partitions' leadership off and took them out of
//! the ISRs while it was offline (the heartbeat names them); once it is back, the next
//! heartbeat names none, its followers catch up and the leaders let them back in.

use std::time::Duration;

use super::ReplicaManager;

/// How often an offline log directory that may recover is probed.
pub const LOG_DIR_PROBE_INTERVAL: Duration = Duration::from_secs(5);

impl ReplicaManager {
    /// Probes the offline log directories that may recover and brings back those that
    /// take writes again. Blocking (file I/O). Returns the directories brought back.
    pub fn recover_offline_log_dirs(&self) -> Vec<std::path::PathBuf> {
        let dirs = self.log_dirs();
        let mut back = Vec::new();
        for (i, path) in dirs.dirs().iter().enumerate() {
            let seen = match dirs.probe(i) {
                Ok(None) => continue,
                Ok(Some(seen)) => seen,
                Err(e) => {
                    tracing::debug!(log_dir = %path.display(), error = %e, "offline log dir still refuses writes");
                    continue;
                }
            };
            let partitions: Vec<_> = self
                .all_partitions()
                .into_iter()
                .filter(|p| dirs.index_of_partition_dir(&p.dir()) == Some(i))
                .collect();
            let now_ms = self.now_ms();
            let reopened = partitions
                .iter()
                .try_for_each(|p| p.reopen_log(now_ms, self.files()).map_err(|e| (p.topic.clone(), p.index, e)));
            match reopened {
                Ok(()) if dirs.set_online(i, seen) => {
                    tracing::warn!(log_dir = %path.display(), partitions = partitions.len(),
                        "log dir takes writes again: its partitions were reopened from their files and serve again");
                    back.push(path.clone());
                }
                Ok(()) => tracing::error!(log_dir = %path.display(),
                    "log dir failed again while its partitions were reopened; it stays offline until a restart"),
                Err((topic, partition, e)) => {
                    // Not tried again: what failed once would fail at every probe.
                    dirs.offline_flag(i).fail_for_good();
                    tracing::error!(log_dir = %path.display(), %topic, partition, error = %e,
                        "log dir takes writes again but a partition did not reopen; it stays offline until a restart")
                }
            }
        }
        back
    }
}
