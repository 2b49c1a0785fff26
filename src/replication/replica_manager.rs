//! The partitions this broker hosts, kept in step with the metadata image.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use tokio::sync::watch;
use uuid::Uuid;

use super::blocking_pool::BlockingPool;
use super::partition::{Partition, PartitionError, PartitionId};
use crate::config::BrokerConfig;
use crate::controller::{MetadataImage, TopicImage};
use crate::storage::LogConfig;

/// Directory of the metadata log inside the data dir; never a partition of a user topic.
pub const METADATA_DIR: &str = "__cluster_metadata-0";

pub struct ReplicaManager {
    data_dir: PathBuf,
    broker: BrokerConfig,
    /// topic id → partitions, indexed by partition number.
    partitions: RwLock<HashMap<Uuid, Vec<Arc<Partition>>>>,
    /// Bumped after every append so that waiting fetches wake up.
    appended: watch::Sender<u64>,
    /// Where decompression and other CPU-heavy per-request work runs.
    pool: BlockingPool,
}

impl ReplicaManager {
    pub fn new(broker: &BrokerConfig) -> ReplicaManager {
        let (appended, _) = watch::channel(0);
        ReplicaManager {
            data_dir: broker.data_dir.clone(),
            broker: broker.clone(),
            partitions: RwLock::new(HashMap::new()),
            appended,
            pool: BlockingPool::per_core(),
        }
    }

    /// The bounded pool for CPU-heavy work that must stay off the async workers.
    pub fn pool(&self) -> &BlockingPool {
        &self.pool
    }

    pub fn partition_dir(&self, topic: &str, partition: i32) -> PathBuf {
        self.data_dir.join(format!("{topic}-{partition}"))
    }

    /// The log settings of a topic: its overrides over the broker defaults.
    pub fn log_config_for(&self, topic: &TopicImage) -> (LogConfig, bool) {
        let mut c = self.broker.default_log_config();
        let get = |k: &str| topic.configs.get(k).map(String::as_str);
        let num = |k: &str| get(k).and_then(|v| v.trim().parse::<i64>().ok());
        if let Some(v) = num("segment.bytes") {
            c.segment_bytes = v.max(14) as u64;
        }
        if let Some(v) = num("segment.ms") {
            c.segment_ms = v;
        }
        if let Some(v) = num("retention.ms") {
            c.retention_ms = v;
        }
        if let Some(v) = num("retention.bytes") {
            c.retention_bytes = v;
        }
        if let Some(v) = num("flush.messages") {
            c.flush_messages = v;
        }
        if let Some(v) = num("flush.ms") {
            c.flush_ms = v;
        }
        if let Some(v) = num("index.interval.bytes") {
            c.index_interval_bytes = v.max(0) as u64;
        }
        if let Some(v) = num("max.message.bytes") {
            c.max_message_bytes = v.max(0) as usize;
        }
        if let Some(policy) = get("cleanup.policy") {
            let has = |p: &str| policy.split(',').any(|x| x.trim() == p);
            c.cleanup_delete = has("delete");
            c.cleanup_compact = has("compact");
        }
        if let Some(v) = num("delete.retention.ms") {
            c.delete_retention_ms = v;
        }
        if let Some(v) = num("min.compaction.lag.ms") {
            c.min_compaction_lag_ms = v;
        }
        if let Some(v) = num("max.compaction.lag.ms") {
            c.max_compaction_lag_ms = v;
        }
        if let Some(v) = get("min.cleanable.dirty.ratio").and_then(|v| v.trim().parse::<f64>().ok()) {
            c.min_cleanable_dirty_permille = (v.clamp(0.0, 1.0) * 1000.0).round() as u32;
        }
        let log_append_time = get("message.timestamp.type") == Some("LogAppendTime");
        (c, log_append_time)
    }

    /// Open, reconfigure or delete local partitions so they match `image`.
    pub fn apply_image(&self, image: &MetadataImage, now_ms: i64) -> Result<(), PartitionError> {
        let mut map = self.partitions.write().unwrap_or_else(|e| e.into_inner());
        // Topics that are gone: drop and delete their data.
        let gone: Vec<Uuid> = map.keys().filter(|id| image.topic_by_id(id).is_none()).copied().collect();
        for id in gone {
            if let Some(parts) = map.remove(&id) {
                for p in parts {
                    tracing::info!(topic = %p.topic, partition = p.index, "deleting partition of deleted topic");
                    p.mark_deleted();
                    remove_partition_dir(&p.dir);
                }
            }
        }
        for topic in image.topics.values() {
            let (config, lat) = self.log_config_for(topic);
            let parts = map.entry(topic.topic_id).or_default();
            for p in parts.iter() {
                p.set_config(config.clone(), lat);
            }
            for pi in topic.partitions.iter().skip(parts.len()) {
                let dir = self.partition_dir(&topic.name, pi.partition);
                let id = PartitionId { topic: &topic.name, topic_id: topic.topic_id, index: pi.partition };
                let p = Partition::open(id, dir, config.clone(), lat, pi.leader_epoch, now_ms)?;
                parts.push(Arc::new(p));
            }
        }
        Ok(())
    }

    /// Delete partition directories left behind by topics the image no longer has
    /// (a crash between the metadata commit of a deletion and the file removal).
    pub fn remove_orphans(&self, image: &MetadataImage) {
        let Ok(entries) = std::fs::read_dir(&self.data_dir) else { return };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name == METADATA_DIR || !e.path().is_dir() {
                continue;
            }
            let Some((topic, part)) = name.rsplit_once('-') else { continue };
            let Ok(part) = part.parse::<usize>() else { continue };
            let known = image.topic(topic).is_some_and(|t| part < t.partitions.len());
            if !known {
                tracing::warn!(dir = %e.path().display(), "removing partition directory of a topic that does not exist");
                remove_partition_dir(&e.path());
            }
        }
    }

    pub fn partition(&self, topic_id: &Uuid, partition: i32) -> Option<Arc<Partition>> {
        let map = self.partitions.read().unwrap_or_else(|e| e.into_inner());
        map.get(topic_id)?.get(usize::try_from(partition).ok()?).cloned()
    }

    pub fn all_partitions(&self) -> Vec<Arc<Partition>> {
        let map = self.partitions.read().unwrap_or_else(|e| e.into_inner());
        map.values().flatten().cloned().collect()
    }

    pub fn notify_appended(&self) {
        self.appended.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub fn subscribe_appends(&self) -> watch::Receiver<u64> {
        self.appended.subscribe()
    }
}

fn remove_partition_dir(dir: &Path) {
    if let Err(e) = std::fs::remove_dir_all(dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::error!(dir = %dir.display(), error = %e, "failed to delete partition directory");
        }
    }
}
