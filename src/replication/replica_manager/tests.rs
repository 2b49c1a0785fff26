//! The replica manager owns a write until it is safe: acks decide what "safe" waits for.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::controller::{MetadataImage, MetadataRecord, PartitionImage};
use crate::storage::test_util::{build_records_batch, TestRecord};

/// A replica manager for broker 1 with its data in `dir`, its settings changed by `tweak`.
fn manager_in(dir: &Path, tweak: impl FnOnce(&mut BrokerConfig)) -> (BrokerConfig, Arc<ReplicaManager>) {
    let mut broker = BrokerConfig::build(&[]).unwrap();
    broker.data_dir = dir.to_owned();
    tweak(&mut broker);
    let manager = Arc::new(ReplicaManager::new(&broker, Arc::new(|| NOW)).unwrap());
    (broker, manager)
}

fn setup(dir: &Path, tweak: impl FnOnce(&mut BrokerConfig)) -> (Arc<ReplicaManager>, Arc<Partition>) {
    let (broker, manager) = manager_in(dir, tweak);
    let config = PartitionConfig::resolve(&broker, &Default::default(), &Default::default());
    let id = PartitionId { topic: "t", topic_id: Uuid::new_v4(), index: 0 };
    let partition =
        Arc::new(Partition::open(id, dir.join("t-0"), config, 0, NOW, &crate::storage::FileCache::private()).unwrap());
    (manager, partition)
}

fn records(n: usize) -> BytesMut {
    let recs: Vec<TestRecord> = (0..n).map(|_| TestRecord { key: None, value: Some(b"v"), timestamp: NOW }).collect();
    BytesMut::from(&build_records_batch(0, &recs, -1)[..])
}

/// The producer's clock and the broker's agree (timestamps are checked on append).
const NOW: i64 = 1_000;

fn far() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

/// An acks=all write of `n` records to `p`, running on its own task until `deadline`.
fn spawn_acks_all(
    manager: &Arc<ReplicaManager>,
    p: &Arc<Partition>,
    n: usize,
    deadline: Instant,
) -> tokio::task::JoinHandle<Result<AppendResult, PartitionError>> {
    let (manager, p) = (manager.clone(), p.clone());
    tokio::spawn(async move { manager.append(&p, records(n), Acks::All, deadline, NOW).await })
}

/// Until `write` waits in the purgatory; a write that ended instead fails the test.
async fn parked<T>(manager: &ReplicaManager, write: &tokio::task::JoinHandle<T>) {
    while manager.purgatory().parked() == 0 {
        assert!(!write.is_finished(), "the write ended instead of waiting");
        tokio::task::yield_now().await;
    }
}

/// Broker 1 leads `replicas` with `isr` in sync, in epoch 0.
fn leadership(replicas: &[i32], isr: &[i32]) -> PartitionImage {
    PartitionImage {
        partition: 0,
        replicas: replicas.to_vec(),
        isr: isr.to_vec(),
        leader: 1,
        leader_epoch: 0,
        partition_epoch: 0,
        adding_replicas: vec![],
        removing_replicas: vec![],
        elr: Vec::new(),
        last_known_elr: Vec::new(),
    }
}

/// Leader 1 with follower 2 in the ISR: acks=all waits for the follower.
fn two_replicas(p: &Partition) {
    p.set_leadership(&leadership(&[1, 2], &[1, 2]), REPLICA_LAG_TIME_MAX_MS, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_answers_only_once_the_high_watermark_passes_the_write() {
    let dir = tempfile::tempdir().unwrap();
    let (manager, p) = setup(dir.path(), |_| {});
    two_replicas(&p);
    let write = spawn_acks_all(&manager, &p, 3, far());
    // The records are in the leader's log, but not yet safe.
    parked(&manager, &write).await;
    assert_eq!(p.log_end_offset(), 3);
    assert_eq!(p.high_watermark(), 0);

    // The follower fetches part of the way: still not safe.
    manager.follower_fetched(&p, 2, 2, 10);
    tokio::task::yield_now().await;
    assert!(!write.is_finished());
    assert_eq!(p.high_watermark(), 2);

    manager.follower_fetched(&p, 2, 3, 20);
    let result = write.await.unwrap().unwrap();
    assert_eq!((result.base_offset, result.last_offset), (0, 2));
    assert_eq!(p.high_watermark(), 3);
    assert_eq!(manager.purgatory().parked(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_1_answers_once_the_leader_has_the_write() {
    let dir = tempfile::tempdir().unwrap();
    let (manager, p) = setup(dir.path(), |_| {});
    two_replicas(&p);
    let result = manager.append(&p, records(2), Acks::Leader, far(), NOW).await.unwrap();
    assert_eq!(result.last_offset, 1);
    assert_eq!(p.high_watermark(), 0, "the follower has nothing yet");
}

#[tokio::test(start_paused = true)]
async fn acks_all_times_out_with_the_write_kept_in_the_leader_log() {
    let dir = tempfile::tempdir().unwrap();
    let (manager, p) = setup(dir.path(), |_| {});
    two_replicas(&p);
    let deadline = Instant::now() + Duration::from_millis(1_500);
    let err = manager.append(&p, records(1), Acks::All, deadline, NOW).await.unwrap_err();
    assert!(matches!(err, PartitionError::ReplicationTimedOut(_)), "{err:?}");
    assert_eq!(p.log_end_offset(), 1, "Kafka keeps it too: the producer's retry is deduplicated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_below_min_insync_replicas_is_refused_before_the_append() {
    let dir = tempfile::tempdir().unwrap();
    let (manager, p) = setup(dir.path(), |c| c.min_insync_replicas = 2);
    p.set_leadership(&leadership(&[1, 2], &[1]), REPLICA_LAG_TIME_MAX_MS, 0);
    let err = manager.append(&p, records(1), Acks::All, far(), NOW).await.unwrap_err();
    assert!(matches!(err, PartitionError::NotEnoughReplicas { isr: 1, min_isr: 2 }), "{err:?}");
    assert_eq!(p.log_end_offset(), 0);
    // acks=1 does not ask for replicas.
    manager.append(&p, records(1), Acks::Leader, far(), NOW).await.unwrap();
    assert_eq!(p.log_end_offset(), 1);
}

/// While the ISR is smaller than `min.insync.replicas` the high watermark does not move
/// (Kafka 4, KIP-966): an acks=all write waiting when the ISR shrank below the minimum is
/// not answered as safe (it times out, kept in the leader's log but invisible to readers),
/// the next one is refused before its append, and once a follower is back in the ISR and
/// has the records the high watermark moves past them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_high_watermark_waits_while_the_isr_is_below_the_minimum() {
    let dir = tempfile::tempdir().unwrap();
    let (manager, p) = setup(dir.path(), |c| c.min_insync_replicas = 2);
    p.set_leadership(&leadership(&[1, 2, 3], &[1, 2, 3]), REPLICA_LAG_TIME_MAX_MS, 0);
    let write = spawn_acks_all(&manager, &p, 2, Instant::now() + Duration::from_millis(500));
    parked(&manager, &write).await;
    // Followers 2 and 3 fall out of the ISR (the controller committed the shrink): the
    // leader alone holds the write, fewer than the minimum.
    manager.set_role(&p, &leadership(&[1, 2, 3], &[1]), NOW);
    let err = write.await.unwrap().unwrap_err();
    assert!(matches!(err, PartitionError::ReplicationTimedOut(_)), "{err:?}");
    assert_eq!((p.log_end_offset(), p.high_watermark()), (2, 0), "kept, not visible");
    let err = manager.append(&p, records(1), Acks::All, far(), NOW).await.unwrap_err();
    assert!(matches!(err, PartitionError::NotEnoughReplicas { isr: 1, min_isr: 2 }), "{err:?}");

    // Follower 2 back in the ISR with the records: two in sync meet the minimum.
    manager.set_role(&p, &leadership(&[1, 2, 3], &[1, 2]), NOW);
    assert_eq!(p.high_watermark(), 0, "follower 2 has not fetched yet");
    manager.follower_fetched(&p, 2, 2, NOW);
    assert_eq!(p.high_watermark(), 2);
}

/// An acks=all write whose ISR shrinks below `min.insync.replicas` after the high
/// watermark passed it, before its answer, gets NOT_ENOUGH_REPLICAS_AFTER_APPEND (Kafka's
/// DelayedProduce checks the ISR when it completes). One thread, so that the shrink comes
/// between the wake-up and the waiting write's check.
#[tokio::test]
async fn acks_all_answers_not_enough_replicas_after_append_when_the_isr_shrank_before_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let (manager, p) = setup(dir.path(), |c| c.min_insync_replicas = 2);
    p.set_leadership(&leadership(&[1, 2, 3], &[1, 2, 3]), REPLICA_LAG_TIME_MAX_MS, 0);
    let write = spawn_acks_all(&manager, &p, 2, far());
    parked(&manager, &write).await;
    manager.follower_fetched(&p, 2, 2, NOW);
    manager.follower_fetched(&p, 3, 2, NOW);
    assert_eq!(p.high_watermark(), 2);
    manager.set_role(&p, &leadership(&[1, 2, 3], &[1]), NOW);
    let err = write.await.unwrap().unwrap_err();
    assert!(matches!(err, PartitionError::NotEnoughReplicasAfterAppend { isr: 1, min_isr: 2 }), "{err:?}");
}

/// A lower `min.insync.replicas` (a topic or broker-wide config change) releases a high
/// watermark held by the old one, and the waiting acks=all write with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lower_min_insync_replicas_releases_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let (manager, p) = setup(dir.path(), |c| c.min_insync_replicas = 2);
    p.set_leadership(&leadership(&[1, 2, 3], &[1]), REPLICA_LAG_TIME_MAX_MS, 0);
    manager.append(&p, records(2), Acks::Leader, far(), NOW).await.unwrap();
    assert_eq!(p.high_watermark(), 0);
    let mut config = p.config();
    config.min_insync_replicas = 1;
    assert!(p.set_config(config), "the high watermark moved");
    assert_eq!(p.high_watermark(), 2);
}

/// As in Kafka (`Partition.effectiveMinIsr`), `min.insync.replicas` counts at most the
/// partition's replicas: on a partition of one replica, min.insync.replicas=2 does not
/// stop acks=all writes; on two replicas with one in sync, it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_insync_replicas_is_capped_at_the_replica_count() {
    let dir = tempfile::tempdir().unwrap();
    let (manager, p) = setup(dir.path(), |c| c.min_insync_replicas = 2);
    manager.set_role(&p, &leadership(&[1], &[1]), NOW);
    let result = manager.append(&p, records(1), Acks::All, far(), NOW).await.unwrap();
    assert_eq!(result.last_offset, 0);
    manager.set_role(&p, &leadership(&[1, 2], &[1]), NOW);
    let err = manager.append(&p, records(1), Acks::All, far(), NOW).await.unwrap_err();
    assert!(matches!(err, PartitionError::NotEnoughReplicas { isr: 1, min_isr: 2 }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fsync_mode_answers_after_the_fsync_and_moves_what_is_flushed() {
    let dir = tempfile::tempdir().unwrap();
    let (manager, p) = setup(dir.path(), |c| c.flush_mode = FlushMode::Fsync);
    p.set_leadership(&leadership(&[1], &[1]), REPLICA_LAG_TIME_MAX_MS, 0);
    assert_eq!(p.flushed_through(), 0);
    manager.append(&p, records(4), Acks::Leader, far(), NOW).await.unwrap();
    assert_eq!(p.flushed_through(), 4);
    // acks=0 never waits for the disk.
    manager.append(&p, records(1), Acks::None, far(), NOW).await.unwrap();
    assert_eq!(p.flushed_through(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_releases_a_waiting_acks_all_write_with_a_retriable_error() {
    let dir = tempfile::tempdir().unwrap();
    let (manager, p) = setup(dir.path(), |_| {});
    two_replicas(&p);
    let write = spawn_acks_all(&manager, &p, 1, far());
    parked(&manager, &write).await;
    manager.purgatory().close();
    assert!(matches!(write.await.unwrap(), Err(PartitionError::ShuttingDown)));
}

/// The record of partition 0 of `topic_id`, with broker 1 its only replica and leader in
/// `leader_epoch`.
fn solo_partition(topic_id: Uuid, leader_epoch: i32) -> MetadataRecord {
    MetadataRecord::Partition {
        topic_id,
        partition: 0,
        replicas: vec![1],
        isr: vec![1],
        leader: 1,
        leader_epoch,
        partition_epoch: leader_epoch,
        adding_replicas: vec![],
        removing_replicas: vec![],
        eligible_leader_replicas: Vec::new(),
        last_known_elr: Vec::new(),
    }
}

/// A partition record for a partition already open (a new leader epoch, as after an
/// election) reaches the local partition: its epoch is what Produce and Fetch check.
#[test]
fn a_new_leader_epoch_reaches_an_open_partition() {
    let dir = tempfile::tempdir().unwrap();
    let (_, manager) = manager_in(dir.path(), |_| {});
    let topic_id = Uuid::new_v4();
    let mut image = MetadataImage::default();
    let created = [MetadataRecord::Topic { name: "t".into(), topic_id }, solo_partition(topic_id, 0)];
    created.iter().for_each(|r| image.apply(r));
    manager.apply_delta(&image, &MetadataDelta::of(&created), NOW).unwrap();
    let p = manager.partition(&topic_id, 0).unwrap();
    assert_eq!(p.leader_epoch(), 0);
    let elected = [solo_partition(topic_id, 3)];
    elected.iter().for_each(|r| image.apply(r));
    manager.apply_delta(&image, &MetadataDelta::of(&elected), NOW).unwrap();
    assert!(Arc::ptr_eq(&p, &manager.partition(&topic_id, 0).unwrap()), "the same partition, not reopened");
    assert_eq!(p.leader_epoch(), 3);
}

/// A broker-wide default of a topic config set at runtime reaches the open partitions of
/// every topic without its own value, this broker's value over the cluster's, and goes
/// when it is deleted.
#[test]
fn a_broker_wide_topic_default_reaches_open_partitions_of_topics_without_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, manager) = manager_in(dir.path(), |_| {});
    let (plain, own) = (Uuid::from_u128(1), Uuid::from_u128(2));
    let mut image = MetadataImage::default();
    let mut created = vec![];
    for (name, topic_id) in [("plain", plain), ("own", own)] {
        created.push(MetadataRecord::Topic { name: name.into(), topic_id });
        created.push(solo_partition(topic_id, 0));
    }
    created.push(MetadataRecord::TopicConfig { topic_id: own, name: "retention.ms".into(), value: Some("5".into()) });
    let mut commit = |records: &[MetadataRecord]| {
        records.iter().for_each(|r| image.apply(r));
        manager.apply_delta(&image, &MetadataDelta::of(records), NOW).unwrap();
    };
    commit(&created);
    let retention = |id| manager.partition(&id, 0).unwrap().config().log.retention_ms;
    assert_eq!((retention(plain), retention(own)), (broker.log_retention_ms, 5));
    let set = |resource: &str, value: Option<&str>| MetadataRecord::BrokerConfig {
        resource: resource.into(),
        name: "log.retention.ms".into(),
        value: value.map(Into::into),
    };
    commit(&[set("", Some("1000"))]);
    assert_eq!((retention(plain), retention(own)), (1000, 5));
    commit(&[set("1", Some("300"))]);
    assert_eq!(retention(plain), 300);
    commit(&[set("2", Some("7"))]);
    assert_eq!(retention(plain), 300, "another broker's value is that broker's");
    commit(&[set("1", None), set("", None)]);
    assert_eq!((retention(plain), retention(own)), (broker.log_retention_ms, 5));
}

/// Only partition directories of topics the image does not have are removed: a directory
/// named like one that holds directories (a dev cluster's `node-1`) is left alone.
#[test]
fn orphans_are_partition_directories_only() {
    let dir = tempfile::tempdir().unwrap();
    let (manager, _) = setup(dir.path(), |_| {});
    let gone = dir.path().join("deleted-0");
    std::fs::create_dir_all(&gone).unwrap();
    std::fs::write(gone.join("00000000000000000000.log"), b"").unwrap();
    let node = dir.path().join("node-1");
    std::fs::create_dir_all(node.join("__cluster_metadata-0")).unwrap();
    manager.remove_orphans(&crate::controller::MetadataImage::default());
    assert!(!gone.exists(), "an orphan partition directory is removed");
    assert!(node.join("__cluster_metadata-0").exists(), "a directory holding directories is not a partition's");
}

#[test]
fn new_partitions_open_in_parallel_and_come_back_in_order() {
    let jobs: Vec<usize> = (0..50).collect();
    let threads = std::sync::Mutex::new(std::collections::HashSet::new());
    let opened = super::open_in_parallel(&jobs, |j| {
        threads.lock().unwrap().insert(std::thread::current().id());
        j * 2
    });
    assert_eq!(opened, (0..50).map(|j| j * 2).collect::<Vec<_>>());
    assert!(threads.lock().unwrap().len() > 1);
    assert_eq!(super::open_in_parallel(&[7], |j| *j), vec![7]);
}

/// A broker with two log directories and topic "t" (one partition, led here), for the
/// moves between them.
struct TwoDirs {
    _root: tempfile::TempDir,
    dirs: [PathBuf; 2],
    broker: BrokerConfig,
    topic_id: Uuid,
    /// The metadata without a throttle…
    image: MetadataImage,
    /// …and with `replica.alter.log.dirs.io.max.bytes.per.second` at 1000 B/s.
    throttled: MetadataImage,
}

impl TwoDirs {
    fn new() -> TwoDirs {
        use crate::controller::broker_config::REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND as RATE;
        let root = tempfile::tempdir().unwrap();
        let dirs = [root.path().join("a"), root.path().join("b")];
        let mut broker = BrokerConfig::build(&[]).unwrap();
        broker.data_dir = dirs[0].clone();
        broker.log_dirs = dirs.to_vec();
        let topic_id = Uuid::from_u128(9);
        let mut image = MetadataImage::default();
        image.apply(&MetadataRecord::Topic { name: "t".into(), topic_id });
        image.apply(&solo_partition(topic_id, 0));
        let mut throttled = image.clone();
        let rate = Some("1000".into());
        throttled.apply(&MetadataRecord::BrokerConfig { resource: "1".into(), name: RATE.into(), value: rate });
        TwoDirs { _root: root, dirs, broker, topic_id, image, throttled }
    }

    /// A replica manager started on `image`, and its partition of "t".
    fn start(&self, image: &MetadataImage) -> (Arc<ReplicaManager>, Arc<Partition>) {
        let manager = Arc::new(ReplicaManager::new(&self.broker, Arc::new(|| NOW)).unwrap());
        manager.apply_image(image, NOW).unwrap();
        let p = manager.partition(&self.topic_id, 0).unwrap();
        (manager, p)
    }

    /// Writes 3 MiB and more to `p` (three chunks of a move's copy), starts moving it to
    /// the other directory, and waits until the copy holds bytes. Returns the index of the
    /// directory it moves from.
    async fn fill_and_start_moving(&self, manager: &Arc<ReplicaManager>, p: &Arc<Partition>) -> usize {
        let from = manager.log_dirs().index_holding("t-0").unwrap();
        let value = vec![b'x'; 64 * 1024];
        for _ in 0..48 {
            let recs = [TestRecord { key: None, value: Some(&value), timestamp: NOW }];
            let batch = BytesMut::from(&build_records_batch(0, &recs, -1)[..]);
            manager.append(p, batch, Acks::Leader, far(), NOW).await.unwrap();
        }
        manager.move_partition(p, 1 - from);
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.copied(1 - from) == 0 {
            assert!(Instant::now() < deadline, "the move never started copying");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        from
    }

    /// The `-future` copy of "t-0" in directory `to`.
    fn future(&self, to: usize) -> PathBuf {
        self.dirs[to].join("t-0-future")
    }

    /// Bytes of the first segment's copy in directory `to`.
    fn copied(&self, to: usize) -> u64 {
        std::fs::metadata(self.future(to).join("00000000000000000000.log")).map_or(0, |m| m.len())
    }

    /// Until "t-0" is in directory `to`, at most 20 s.
    async fn wait_moved(&self, manager: &ReplicaManager, to: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while manager.log_dirs().index_holding("t-0") != Some(to) {
            assert!(Instant::now() < deadline, "the move never finished");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// `replica.alter.log.dirs.io.max.bytes.per.second` holds a move between log
/// directories after a chunk while its quota is exceeded; lifting it lets the move
/// finish, with every record in the new directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_log_dir_move_waits_for_its_quota_and_finishes_when_the_bound_is_lifted() {
    let t = TwoDirs::new();
    let (manager, p) = t.start(&t.throttled);
    let from = t.fill_and_start_moving(&manager, &p).await;
    let end = p.log_end_offset();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let held = t.copied(1 - from);
    assert_eq!(held, crate::storage::log_dirs::COPY_CHUNK, "one chunk, then held by the quota");
    assert_eq!(manager.log_dirs().index_holding("t-0"), Some(from), "not moved while throttled");
    assert_eq!(manager.quotas().alter_log_dirs.total_bytes(), held);

    manager.apply_delta(&t.image, &MetadataDelta::default(), NOW).unwrap();
    t.wait_moved(&manager, 1 - from).await;
    assert!(!t.future(1 - from).exists());
    assert_eq!(p.log_end_offset(), end);
    assert_eq!(p.fetch(0, usize::MAX).unwrap().records.read().unwrap().len() as u64, p.size_bytes());
}

/// A move between log directories that the broker's stop interrupted (here held by its
/// throttle) keeps its copy, and the next start takes the move up again and finishes it,
/// as Kafka resumes its future log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_dir_move_interrupted_by_a_stop_is_taken_up_again_at_the_next_start() {
    let t = TwoDirs::new();
    let (manager, p) = t.start(&t.throttled);
    let from = t.fill_and_start_moving(&manager, &p).await;
    let (end, size) = (p.log_end_offset(), p.size_bytes());
    // The broker stops mid-move.
    manager.purgatory().close();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !manager.moving().is_empty() {
        assert!(Instant::now() < deadline, "the move did not stop with the broker");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(t.copied(1 - from), crate::storage::log_dirs::COPY_CHUNK, "the copy made so far is kept");
    assert_eq!(manager.log_dirs().index_holding("t-0"), Some(from));
    drop((p, manager));

    // The next start, without the throttle: the move resumes and finishes.
    let (manager, p) = t.start(&t.image);
    manager.resume_log_dir_moves();
    t.wait_moved(&manager, 1 - from).await;
    assert!(!t.future(1 - from).exists() && !t.dirs[from].join("t-0").exists());
    assert_eq!((p.log_end_offset(), p.size_bytes()), (end, size));
    assert_eq!(p.fetch(0, usize::MAX).unwrap().records.read().unwrap().len() as u64, size);
}
