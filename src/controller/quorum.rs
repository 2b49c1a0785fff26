//! The controller: validates metadata changes and commits them as records.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use uuid::Uuid;

use super::delta::{MetadataDelta, MetadataListener};
use super::image::{MetadataImage, TopicImage};
use super::metadata_log::MetadataLog;
use super::records::MetadataRecord;
use super::{topic_config, ControllerError};

/// Kafka's limit on topic name length.
const MAX_TOPIC_NAME_LEN: usize = 249;
/// Upper bound on partitions per topic: a guard against a request that would create
/// millions of directories.
pub const MAX_PARTITIONS: i32 = 10_000;
/// Producer ids are persisted in blocks so that handing one out costs no fsync.
const PRODUCER_ID_BLOCK: i64 = 1000;

#[derive(Debug, Clone)]
pub struct NewTopic {
    pub name: String,
    /// -1 = broker default.
    pub num_partitions: i32,
    /// -1 = broker default.
    pub replication_factor: i16,
    /// Explicit replica lists per partition, if the request gave them.
    pub assignments: Vec<(i32, Vec<i32>)>,
    pub configs: Vec<(String, Option<String>)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ConfigChange {
    Set(String, String),
    Delete(String),
}

struct Inner {
    log: MetadataLog,
    /// Next producer id to hand out; the image's `next_producer_id` is the persisted limit.
    next_producer_id: i64,
}

pub struct Controller {
    node_id: i32,
    default_partitions: i32,
    inner: Mutex<Inner>,
    image: RwLock<Arc<MetadataImage>>,
    /// Told of every commit, in order (under `inner`'s lock).
    listeners: RwLock<Vec<Arc<dyn MetadataListener>>>,
}

impl Controller {
    /// Open the metadata log under `dir`, replay it, and register this broker.
    pub fn open(
        dir: &Path,
        node_id: i32,
        advertised: (&str, u16),
        cluster_id: Option<&str>,
        default_partitions: i32,
    ) -> Result<Controller, ControllerError> {
        let (log, records) = MetadataLog::open(dir)?;
        let mut image = MetadataImage::default();
        for r in &records {
            image.apply(r);
        }
        let next_producer_id = image.next_producer_id;
        let controller = Controller {
            node_id,
            default_partitions,
            inner: Mutex::new(Inner { log, next_producer_id }),
            image: RwLock::new(Arc::new(image)),
            listeners: RwLock::new(Vec::new()),
        };
        let current = controller.image();
        let mut boot = Vec::new();
        if current.cluster_id.is_empty() {
            let id = cluster_id.map(str::to_owned).unwrap_or_else(new_cluster_id);
            boot.push(MetadataRecord::Cluster { cluster_id: id });
        }
        let me = current.brokers.get(&node_id);
        if me.is_none_or(|b| b.host != advertised.0 || b.port != advertised.1) {
            boot.push(MetadataRecord::RegisterBroker {
                node_id,
                host: advertised.0.to_owned(),
                port: advertised.1,
                rack: None,
            });
        }
        if !boot.is_empty() {
            controller.commit(boot)?;
        }
        Ok(controller)
    }

    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    /// The latest committed image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// From now on `listener` hears of every commit. It is not told of the current image:
    /// the subscriber reads [`Controller::image`] itself (at start, before serving).
    pub fn subscribe(&self, listener: Arc<dyn MetadataListener>) {
        self.listeners.write().unwrap_or_else(|e| e.into_inner()).push(listener);
    }

    /// Append records to the metadata log (durably) and publish the new image with its
    /// delta to every listener before returning, so a request that changed metadata is
    /// answered only once the broker acts on the change (a created topic's partitions
    /// are open when CreateTopics returns).
    fn commit_locked(
        &self,
        inner: &mut Inner,
        records: Vec<MetadataRecord>,
    ) -> Result<Arc<MetadataImage>, ControllerError> {
        let mut image = (*self.image()).clone();
        for r in &records {
            image.apply(r);
        }
        let image = Arc::new(image);
        let delta = MetadataDelta::of(&records);
        let listeners = self.listeners.read().unwrap_or_else(|e| e.into_inner()).clone();
        for (i, l) in listeners.iter().enumerate() {
            if let Err(reason) = l.prepare(&image, &delta) {
                listeners[..i].iter().for_each(|l| l.discard());
                return Err(ControllerError::Storage(reason));
            }
        }
        if let Err(e) = inner.log.append(&records) {
            listeners.iter().for_each(|l| l.discard());
            return Err(e);
        }
        *self.image.write().unwrap_or_else(|e| e.into_inner()) = image.clone();
        for l in &listeners {
            l.on_commit(&image, &delta);
        }
        Ok(image)
    }

    fn commit(&self, records: Vec<MetadataRecord>) -> Result<Arc<MetadataImage>, ControllerError> {
        let mut inner = self.lock();
        self.commit_locked(&mut inner, records)
    }

    pub fn create_topic(&self, req: &NewTopic, validate_only: bool) -> Result<Arc<TopicImage>, ControllerError> {
        let mut inner = self.lock();
        let image = self.image();
        validate_topic_name(&req.name)?;
        if image.topic(&req.name).is_some() {
            return Err(ControllerError::TopicAlreadyExists(req.name.clone()));
        }
        let canonical = req.name.replace('.', "_");
        if let Some(other) = image.topics.keys().find(|t| t.replace('.', "_") == canonical) {
            return Err(ControllerError::InvalidTopic(format!(
                "Topic '{}' collides with existing topic: {other}",
                req.name
            )));
        }
        let assignments: Vec<Vec<i32>> = if !req.assignments.is_empty() {
            if req.num_partitions != -1 || req.replication_factor != -1 {
                return Err(ControllerError::InvalidReplicaAssignment(
                    "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.".into(),
                ));
            }
            let mut sorted = req.assignments.clone();
            sorted.sort_by_key(|(p, _)| *p);
            for (i, (p, replicas)) in sorted.iter().enumerate() {
                if *p != i as i32 {
                    return Err(ControllerError::InvalidReplicaAssignment(
                        "Partitions should be a consecutive 0-based integer sequence".into(),
                    ));
                }
                if replicas.is_empty() || replicas.iter().any(|r| !image.brokers.contains_key(r)) {
                    return Err(ControllerError::InvalidReplicaAssignment(format!(
                        "The manual partition assignment includes a broker that is not registered: {replicas:?}"
                    )));
                }
            }
            if sorted.len() as i32 > MAX_PARTITIONS {
                return Err(ControllerError::InvalidPartitions(format!("Too many partitions (max {MAX_PARTITIONS})")));
            }
            sorted.into_iter().map(|(_, r)| r).collect()
        } else {
            let partitions = if req.num_partitions == -1 { self.default_partitions } else { req.num_partitions };
            if partitions <= 0 {
                return Err(ControllerError::InvalidPartitions("Number of partitions must be larger than 0.".into()));
            }
            if partitions > MAX_PARTITIONS {
                return Err(ControllerError::InvalidPartitions(format!(
                    "Number of partitions {partitions} exceeds the maximum of {MAX_PARTITIONS}."
                )));
            }
            let rf = if req.replication_factor == -1 { 1 } else { req.replication_factor };
            if rf <= 0 {
                return Err(ControllerError::InvalidReplicationFactor(
                    "Replication factor must be larger than 0.".into(),
                ));
            }
            if rf as usize > image.brokers.len() {
                return Err(ControllerError::InvalidReplicationFactor(format!(
                    "Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {} broker(s) are registered.",
                    image.brokers.len()
                )));
            }
            (0..partitions).map(|_| vec![self.node_id]).collect()
        };
        let mut seen = BTreeMap::new();
        for (name, value) in &req.configs {
            let value = value.as_deref().ok_or_else(|| {
                ControllerError::InvalidConfig(format!("Null value not supported for topic configs: {name}"))
            })?;
            topic_config::validate(name, value).map_err(ControllerError::InvalidConfig)?;
            seen.insert(name.clone(), value.to_owned());
        }
        let topic_id = Uuid::new_v4();
        let mut records = vec![MetadataRecord::Topic { name: req.name.clone(), topic_id }];
        for (name, value) in seen {
            records.push(MetadataRecord::TopicConfig { topic_id, name, value: Some(value) });
        }
        for (p, replicas) in assignments.into_iter().enumerate() {
            records.push(MetadataRecord::Partition {
                topic_id,
                partition: p as i32,
                leader: replicas[0],
                isr: replicas.clone(),
                replicas,
                leader_epoch: 0,
                partition_epoch: 0,
            });
        }
        if validate_only {
            let mut img = MetadataImage::default();
            for r in &records {
                img.apply(r);
            }
            return img.topic(&req.name).cloned().ok_or_else(|| ControllerError::Internal("no topic".into()));
        }
        let image = self.commit_locked(&mut inner, records)?;
        image.topic(&req.name).cloned().ok_or_else(|| ControllerError::Internal("created topic missing".into()))
    }

    pub fn delete_topic(&self, topic_id: Uuid) -> Result<(), ControllerError> {
        let mut inner = self.lock();
        let image = self.image();
        if image.topic_by_id(&topic_id).is_none() {
            return Err(ControllerError::UnknownTopic(topic_id.to_string()));
        }
        self.commit_locked(&mut inner, vec![MetadataRecord::RemoveTopic { topic_id }])?;
        Ok(())
    }

    /// Grow a topic to `total` partitions (Kafka never shrinks).
    pub fn create_partitions(&self, name: &str, total: i32, validate_only: bool) -> Result<(), ControllerError> {
        let mut inner = self.lock();
        let image = self.image();
        let topic = image.topic(name).ok_or_else(|| ControllerError::UnknownTopic(name.to_owned()))?;
        let current = topic.partitions.len() as i32;
        if total < current {
            return Err(ControllerError::InvalidPartitions(format!(
                "The topic {name} currently has {current} partition(s); {total} would not be an increase."
            )));
        }
        if total == current {
            return Err(ControllerError::InvalidPartitions(format!("Topic already has {current} partition(s).")));
        }
        if total > MAX_PARTITIONS {
            return Err(ControllerError::InvalidPartitions(format!(
                "Number of partitions {total} exceeds the maximum of {MAX_PARTITIONS}."
            )));
        }
        if validate_only {
            return Ok(());
        }
        let records = (current..total)
            .map(|p| MetadataRecord::Partition {
                topic_id: topic.topic_id,
                partition: p,
                replicas: vec![self.node_id],
                isr: vec![self.node_id],
                leader: self.node_id,
                leader_epoch: 0,
                partition_epoch: 0,
            })
            .collect();
        self.commit_locked(&mut inner, records)?;
        Ok(())
    }

    /// Apply config changes to a topic, all or none.
    pub fn alter_topic_configs(
        &self,
        name: &str,
        changes: &[ConfigChange],
        validate_only: bool,
    ) -> Result<(), ControllerError> {
        let mut inner = self.lock();
        let image = self.image();
        let topic = image.topic(name).ok_or_else(|| ControllerError::UnknownTopic(name.to_owned()))?;
        let mut records = Vec::new();
        for change in changes {
            match change {
                ConfigChange::Set(k, v) => {
                    topic_config::validate(k, v).map_err(ControllerError::InvalidConfig)?;
                    records.push(MetadataRecord::TopicConfig {
                        topic_id: topic.topic_id,
                        name: k.clone(),
                        value: Some(v.clone()),
                    });
                }
                ConfigChange::Delete(k) => {
                    if topic_config::find(k).is_none() {
                        return Err(ControllerError::InvalidConfig(format!("Unknown topic config name: {k}")));
                    }
                    records.push(MetadataRecord::TopicConfig {
                        topic_id: topic.topic_id,
                        name: k.clone(),
                        value: None,
                    });
                }
            }
        }
        if validate_only || records.is_empty() {
            return Ok(());
        }
        self.commit_locked(&mut inner, records)?;
        Ok(())
    }

    /// Hand out a fresh producer id; never reused, also across restarts.
    pub fn allocate_producer_id(&self) -> Result<i64, ControllerError> {
        let mut inner = self.lock();
        let limit = self.image().next_producer_id;
        if inner.next_producer_id >= limit {
            let new_limit = inner.next_producer_id.max(limit) + PRODUCER_ID_BLOCK;
            self.commit_locked(&mut inner, vec![MetadataRecord::ProducerIds { next_producer_id: new_limit }])?;
        }
        let id = inner.next_producer_id;
        inner.next_producer_id += 1;
        Ok(id)
    }
}

fn new_cluster_id() -> String {
    // Kafka cluster ids are a base64url-encoded UUID (22 chars).
    let id = Uuid::new_v4();
    let mut s = String::with_capacity(22);
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let v = id.as_u128();
    for i in 0..22 {
        let shift = 128i32 - 6 * (i + 1);
        let idx = if shift >= 0 { (v >> shift) & 0x3f } else { (v << (-shift)) & 0x3f };
        s.push(ALPHABET[idx as usize] as char);
    }
    s
}

/// Kafka's topic name rules (`org.apache.kafka.common.internals.Topic.validate`).
pub fn validate_topic_name(name: &str) -> Result<(), ControllerError> {
    let err = |m: String| Err(ControllerError::InvalidTopic(m));
    if name.is_empty() {
        return err("Topic name is illegal, it can't be empty".into());
    }
    if name == "." || name == ".." {
        return err("Topic name cannot be \".\" or \"..\"".into());
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return err(format!(
            "Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LEN} characters, topic name: {name}"
        ));
    }
    if !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'_' || c == b'-') {
        return err(format!(
            "Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path) -> Controller {
        Controller::open(dir, 1, ("127.0.0.1", 9092), None, 1).unwrap()
    }

    fn new_topic(name: &str, partitions: i32) -> NewTopic {
        NewTopic {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: -1,
            assignments: vec![],
            configs: vec![],
        }
    }

    #[test]
    fn create_alter_delete_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let id;
        {
            let c = open(dir.path());
            let t = c.create_topic(&new_topic("orders", 3), false).unwrap();
            id = t.topic_id;
            assert_eq!(t.partitions.len(), 3);
            c.alter_topic_configs("orders", &[ConfigChange::Set("retention.ms".into(), "1000".into())], false).unwrap();
            c.create_partitions("orders", 5, false).unwrap();
            c.create_topic(&new_topic("gone", 1), false).unwrap();
            let gone = c.image().topic("gone").unwrap().topic_id;
            c.delete_topic(gone).unwrap();
        }
        let c = open(dir.path());
        let img = c.image();
        let t = img.topic("orders").unwrap();
        assert_eq!(t.topic_id, id);
        assert_eq!(t.partitions.len(), 5);
        assert_eq!(t.configs.get("retention.ms").unwrap(), "1000");
        assert!(img.topic("gone").is_none());
        assert_eq!(img.brokers.len(), 1);
        assert_eq!(img.cluster_id.len(), 22);
    }

    #[test]
    fn validation_errors() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path());
        assert!(matches!(c.create_topic(&new_topic("a b", 1), false), Err(ControllerError::InvalidTopic(_))));
        assert!(matches!(c.create_topic(&new_topic("", 1), false), Err(ControllerError::InvalidTopic(_))));
        assert!(matches!(
            c.create_topic(&new_topic(&"x".repeat(250), 1), false),
            Err(ControllerError::InvalidTopic(_))
        ));
        assert!(matches!(c.create_topic(&new_topic("n", 0), false), Err(ControllerError::InvalidPartitions(_))));
        assert!(matches!(c.create_topic(&new_topic("n", -5), false), Err(ControllerError::InvalidPartitions(_))));
        let mut rf = new_topic("rf", 1);
        rf.replication_factor = 3;
        assert!(matches!(c.create_topic(&rf, false), Err(ControllerError::InvalidReplicationFactor(_))));
        let mut cfg = new_topic("cfg", 1);
        cfg.configs = vec![("retention.ms".into(), Some("soon".into()))];
        assert!(matches!(c.create_topic(&cfg, false), Err(ControllerError::InvalidConfig(_))));
        c.create_topic(&new_topic("a.b", 1), false).unwrap();
        assert!(matches!(c.create_topic(&new_topic("a.b", 1), false), Err(ControllerError::TopicAlreadyExists(_))));
        assert!(matches!(c.create_topic(&new_topic("a_b", 1), false), Err(ControllerError::InvalidTopic(_))));
        assert!(matches!(c.create_partitions("a.b", 1, false), Err(ControllerError::InvalidPartitions(_))));
        // validate_only changes nothing
        c.create_topic(&new_topic("dry", 1), true).unwrap();
        assert!(c.image().topic("dry").is_none());
    }

    #[test]
    fn producer_ids_are_never_reused() {
        let dir = tempfile::tempdir().unwrap();
        let first: Vec<i64> = {
            let c = open(dir.path());
            (0..3).map(|_| c.allocate_producer_id().unwrap()).collect()
        };
        assert_eq!(first, vec![0, 1, 2]);
        let c = open(dir.path());
        let next = c.allocate_producer_id().unwrap();
        assert!(next > 2, "{next}");
    }
}
