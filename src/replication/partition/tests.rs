//! Partition-level behaviour that involves the partition's lock: cleaning versus deletion.

use super::*;
use crate::replication::{ProduceLimits, ValidatedRecords};
use crate::storage::test_util::{build_records_batch, TestRecord};
use crate::storage::LogConfig;

fn compacted() -> PartitionConfig {
    let broker = crate::config::BrokerConfig::build(&[]).unwrap();
    let mut config = PartitionConfig::resolve(&broker, &Default::default());
    config.log = LogConfig {
        segment_bytes: 1,
        cleanup_delete: false,
        cleanup_compact: true,
        min_cleanable_dirty_permille: 0,
        ..LogConfig::default()
    };
    config
}

fn open(dir: &std::path::Path) -> Partition {
    let id = PartitionId { topic: "t", topic_id: Uuid::new_v4(), index: 0 };
    Partition::open(id, dir.to_owned(), compacted(), 0, 1_000, &crate::storage::FileCache::private()).unwrap()
}

fn put(p: &Partition, key: &str, value: &str) {
    let rec = [TestRecord { key: Some(key.as_bytes()), value: Some(value.as_bytes()), timestamp: 1_000 }];
    let batch = bytes::BytesMut::from(&build_records_batch(0, &rec, -1)[..]);
    let limits = ProduceLimits { max_message_bytes: usize::MAX, timestamps: None, require_keys: true };
    let mut records = ValidatedRecords::validate(batch, &limits).unwrap();
    p.append(&mut records, 1_000).unwrap();
}

#[test]
fn a_pass_prepared_for_a_deleted_topic_never_touches_a_new_topic_at_the_same_path() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("t-0");
    let old = open(&dir);
    for v in ["1", "2", "3"] {
        put(&old, "k", v);
    }
    let prepared = old.prepare_clean(1_000).unwrap().expect("a pass is due");

    // The topic is deleted and a new one of the same name takes the path.
    old.mark_deleted();
    std::fs::remove_dir_all(&dir).unwrap();
    let new = open(&dir);
    put(&new, "fresh", "a");
    put(&new, "fresh", "b");
    let before = new.fetch(0, 1 << 20).unwrap().records.read().unwrap();

    assert!(old.finish_clean(prepared).unwrap().is_none(), "discarded");
    assert_eq!(new.fetch(0, 1 << 20).unwrap().records.read().unwrap(), before);
    assert!(!dir.join("cleaner.tmp").exists() && !dir.join("cleaner.swap").exists());
    // Nor does a later pass of the deleted partition start.
    assert!(old.clean(1_000).unwrap().is_none());
}
