//! Partition-level behaviour that involves the partition's lock: cleaning versus deletion.

use super::*;
use crate::controller::PartitionImage;
use crate::replication::{ProduceLimits, ValidatedRecords};
use crate::storage::test_util::{build_records_batch, TestRecord};
use crate::storage::{LogConfig, StorageError};

fn compacted() -> PartitionConfig {
    let broker = crate::config::BrokerConfig::build(&[]).unwrap();
    let mut config = PartitionConfig::resolve(&broker, &Default::default(), &Default::default());
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
    let (prepared, moves) = old.prepare_clean(1_000).unwrap().expect("a pass is due");

    // The topic is deleted and a new one of the same name takes the path.
    old.mark_deleted();
    std::fs::remove_dir_all(&dir).unwrap();
    let new = open(&dir);
    put(&new, "fresh", "a");
    put(&new, "fresh", "b");
    let before = new.fetch(0, 1 << 20).unwrap().records.read().unwrap();

    assert!(old.finish_clean(prepared, moves).unwrap().is_none(), "discarded");
    assert_eq!(new.fetch(0, 1 << 20).unwrap().records.read().unwrap(), before);
    assert!(!dir.join("cleaner.tmp").exists() && !dir.join("cleaner.swap").exists());
    // Nor does a later pass of the deleted partition start.
    assert!(old.clean(1_000).unwrap().is_none());
}

/// Partition 0 on brokers 1–3 led by `leader` with `isr`, in leader and partition epoch
/// `epoch`.
fn pi(leader: i32, epoch: i32, isr: &[i32]) -> PartitionImage {
    PartitionImage {
        partition: 0,
        replicas: vec![1, 2, 3],
        isr: isr.to_vec(),
        leader,
        leader_epoch: epoch,
        partition_epoch: epoch,
        adding_replicas: vec![],
        removing_replicas: vec![],
        elr: Vec::new(),
        last_known_elr: Vec::new(),
    }
}

/// Broker 1 leads replicas [1, 2, 3] in `epoch`.
fn lead(p: &Partition, epoch: i32) {
    p.set_leadership(&pi(1, epoch, &[1, 2, 3]), 30_000, 1_000);
}

#[test]
fn a_checkpointed_high_watermark_counts_only_before_the_first_role_and_within_the_log() {
    let root = tempfile::tempdir().unwrap();
    let p = open(&root.path().join("t-0"));
    for v in ["1", "2", "3"] {
        put(&p, "k", v);
    }
    // Nothing checkpointed: a new leader of three replicas starts at the log start.
    assert_eq!(p.high_watermark_to_checkpoint(), 0);
    p.restore_high_watermark(50);
    assert_eq!(p.high_watermark_to_checkpoint(), 3, "capped at the log end offset");
    lead(&p, 1);
    assert_eq!(p.high_watermark(), 3);
    p.restore_high_watermark(1);
    assert_eq!((p.high_watermark(), p.high_watermark_to_checkpoint()), (3, 3), "a role was taken: ignored");

    let q = open(&root.path().join("u-0"));
    put(&q, "k", "1");
    q.restore_high_watermark(-5);
    lead(&q, 1);
    assert_eq!(q.high_watermark(), 0, "never below the log start offset");
}

#[test]
fn the_leader_answers_a_follower_fetch_as_kafka_does() {
    let root = tempfile::tempdir().unwrap();
    let p = open(&root.path().join("t-0"));
    lead(&p, 2);
    for v in ["a", "b", "c"] {
        put(&p, v, v); // offsets 0..3 in epoch 2
    }
    lead(&p, 4);
    put(&p, "d", "d"); // offset 3 in epoch 4
    let read = |replica, current, offset, last_fetched| {
        p.read_for_follower(replica, -1, current, offset, last_fetched, 1 << 20, 2_000)
    };

    // To the log end offset, not the high watermark, and the position moves the HW.
    let r = read(2, 4, 0, None).unwrap();
    assert_eq!((r.log_end_offset, r.diverging_epoch, r.high_watermark), (4, None, 0));
    assert_eq!(r.records.len(), p.log_bytes().len());
    assert!(!r.high_watermark_moved, "follower 3 holds it back");
    assert!(!read(3, 4, 2, Some(2)).unwrap().high_watermark_moved, "follower 2 holds it back now");
    assert!(read(2, 4, 3, Some(2)).unwrap().high_watermark_moved);
    assert_eq!(p.high_watermark(), 2, "the smallest position in the ISR");

    // The request's leader epoch: older is fenced, newer unknown.
    assert!(matches!(read(2, 3, 0, None), Err(PartitionError::FencedLeaderEpoch { .. })));
    assert!(matches!(read(2, 5, 0, None), Err(PartitionError::UnknownLeaderEpoch { .. })));
    // Not a replica of the partition.
    assert!(matches!(read(9, 4, 0, None), Err(PartitionError::NotAReplica(9))));
    // A follower that wrote past epoch 2's end (at 3, in an epoch 3 this leader never
    // had) diverges: epoch 3 is unknown here, the largest below it is 2, ending at 3.
    let r = read(2, 4, 5, Some(3)).unwrap();
    assert_eq!(r.diverging_epoch, Some((2, 3)));
    assert!(r.records.is_empty());
    // Same epoch, but past where it ends here: diverging too.
    assert_eq!(read(2, 4, 4, Some(2)).unwrap().diverging_epoch, Some((2, 3)));
    // Consistent: no divergence.
    assert_eq!(read(2, 4, 3, Some(2)).unwrap().diverging_epoch, None);
    // Past the log end: out of range.
    assert!(matches!(
        read(2, 4, 9, None),
        Err(PartitionError::Storage(StorageError::OffsetOutOfRange { log_start_offset: 0, .. }))
    ));

    // A follower is not a leader: no produce, no consumer fetch, no replica fetch.
    let pi = PartitionImage {
        partition: 0,
        replicas: vec![1, 2, 3],
        isr: vec![1, 2, 3],
        leader: 2,
        leader_epoch: 5,
        partition_epoch: 5,
        adding_replicas: vec![],
        removing_replicas: vec![],
        elr: Vec::new(),
        last_known_elr: Vec::new(),
    };
    assert!(p.become_follower(&pi));
    assert!(!p.become_follower(&pi), "no change the second time");
    assert!(matches!(p.fetch(0, 1 << 20), Err(PartitionError::NotLeaderOrFollower)));
    assert!(matches!(p.produce_config(false), Err(PartitionError::NotLeaderOrFollower)));
    assert!(matches!(read(3, 5, 0, None), Err(PartitionError::NotLeaderOrFollower)));
    let state = p.follower_fetch_state().unwrap();
    assert_eq!((state.leader, state.leader_epoch, state.log_end_offset, state.last_fetched_epoch), (2, 5, 4, Some(4)));
    // An answer fetched under an older state is refused.
    let stale = FollowerFetchState { log_end_offset: 2, ..state };
    assert!(matches!(p.truncate_as_follower(&stale, 1), Err(PartitionError::FetchOffsetMoved { .. })));
    let stale = FollowerFetchState { leader_epoch: 4, ..state };
    assert!(matches!(p.truncate_as_follower(&stale, 1), Err(PartitionError::LeaderEpochChanged { .. })));
    p.truncate_as_follower(&state, 1).unwrap();
    assert_eq!(p.log_end_offset(), 1);
}

/// KAFKA-7128, wired: a follower that holds offsets 0..10 but knows a high watermark of
/// only 5 becomes leader. Follower 2, outside the ISR, is past that high watermark at 7
/// but may lack records the old leader acknowledged: it is proposed for the ISR only
/// once it holds 10, where this leadership began.
#[test]
fn a_new_leader_admits_a_follower_only_from_where_its_leadership_began() {
    let root = tempfile::tempdir().unwrap();
    let p = open(&root.path().join("t-0"));
    p.become_follower(&pi(2, 0, &[1, 2]));
    let fetched = p.follower_fetch_state().unwrap();
    let recs: Vec<String> = (0..10).map(|i| format!("v{i}")).collect();
    let recs: Vec<TestRecord> =
        recs.iter().map(|v| TestRecord { key: None, value: Some(v.as_bytes()), timestamp: 1_000 }).collect();
    assert_eq!(p.append_as_follower(&fetched, &build_records_batch(0, &recs, -1), 1_000).unwrap(), 10);
    p.set_follower_high_watermark(&fetched, 5);

    p.set_leadership(&pi(1, 1, &[1, 3]), 30_000, 2_000);
    assert_eq!(p.follower_fetched(3, 6, 2_100), Some(6));
    p.follower_fetched(2, 7, 2_200);
    assert_eq!(p.take_isr_proposal(), None, "7 is past the high watermark (6), short of 10");
    p.follower_fetched(2, 10, 2_300);
    assert_eq!(
        p.take_isr_proposal().map(|at| at.proposal),
        Some(crate::replication::isr::IsrProposal::Expand { add: 2, broker_epoch: -1 })
    );
}

/// A restarted follower fetched while the leader's proposal to add its old process was
/// out (one proposal at a time): the refusal of that proposal sends the new process's
/// at once, not at the new process's next fetch (which can idle for
/// `replica.fetch.wait.max.ms` when no records come, while the short ISR refuses acks=all
/// writes).
#[test]
fn refusing_a_dead_process_proposes_the_follower_process_that_replaced_it() {
    use crate::replication::isr::IsrProposal;
    use crate::replication::isr_sink::NotCommitted;

    let root = tempfile::tempdir().unwrap();
    let p = open(&root.path().join("t-0"));
    p.set_leadership(&pi(1, 1, &[1, 3]), 30_000, 1_000);
    put(&p, "k", "v");
    p.follower_fetched(3, 1, 1_000);
    let fetch = |process: i64, now: i64| p.read_for_follower(2, process, 1, 1, None, 1 << 20, now).unwrap();
    fetch(77, 1_100);
    let old = p.take_isr_proposal().unwrap();
    assert_eq!(old.proposal, IsrProposal::Expand { add: 2, broker_epoch: 77 });
    fetch(78, 1_200);
    assert_eq!(p.take_isr_proposal(), None, "one proposal in flight");
    p.isr_proposal_not_committed(old.partition_epoch, &old.proposal, NotCommitted::NotAttempted, 1_300);
    let new = p.take_isr_proposal().map(|at| at.proposal);
    assert_eq!(new, Some(IsrProposal::Expand { add: 2, broker_epoch: 78 }));
    // That one refused too (78 is fenced, say): 78 is not proposed again at once.
    p.isr_proposal_not_committed(1, &new.unwrap(), NotCommitted::NotAttempted, 1_400);
    assert_eq!(p.take_isr_proposal(), None);
    fetch(78, 1_500);
    assert_eq!(p.take_isr_proposal(), None);
}

/// A follower whose log ends before its leader's log start (the leader deleted records,
/// by retention or DeleteRecords, while the follower was away) empties its log and
/// starts at the leader's log start offset; an out-of-range answer for any other reason
/// (the follower is past the leader's end) is left to the fetcher's backoff.
#[test]
fn a_follower_behind_the_leaders_log_start_starts_over_there() {
    use crate::replication::replica_fetch::{FetchedData, ReplicaFetchError};
    let root = tempfile::tempdir().unwrap();
    let p = open(&root.path().join("t-0"));
    put(&p, "k", "1");
    p.become_follower(&pi(2, 1, &[2, 3]));
    let state = p.follower_fetch_state().unwrap();
    assert_eq!(state.log_end_offset, 1);

    let gone = ReplicaFetchError::OffsetOutOfRange { log_start_offset: 5 };
    assert_eq!(p.apply_fetched(&state, Err(&gone), 2_000).unwrap(), FetchApplied::StartedOver { log_start_offset: 5 });
    assert_eq!((p.log_start_offset(), p.log_end_offset(), p.high_watermark()), (5, 5, 5));
    assert!(p.log_bytes().is_empty());

    let state = p.follower_fetch_state().unwrap();
    let behind = ReplicaFetchError::OffsetOutOfRange { log_start_offset: 3 };
    assert!(matches!(p.apply_fetched(&state, Err(&behind), 2_000), Err(PartitionError::Replica(_))));
    assert_eq!(p.log_end_offset(), 5, "nothing truncated");
    let nothing_new =
        FetchedData { records: bytes::Bytes::new(), high_watermark: 5, log_start_offset: 5, diverging_epoch: None };
    let applied = p.apply_fetched(&state, Ok(&nothing_new), 2_000).unwrap();
    assert_eq!(applied, FetchApplied::Appended { bytes: 0, high_watermark_moved: false });
}
