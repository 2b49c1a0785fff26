//! Shell tests: a test writer that records, fails, or holds appends until released.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicBool;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use tokio::sync::Semaphore;

use super::*;
use crate::coordinator::group::GroupState;
use crate::coordinator::offsets::MAX_METADATA_BYTES;
use crate::coordinator::writer::AppendFuture;
use crate::coordinator::writer::OffsetsWriteError;

struct TestWriter {
    log: Mutex<Vec<OffsetsRecord>>,
    /// The partition of each append.
    partitions: Mutex<Vec<i32>>,
    fail: Mutex<Option<OffsetsWriteError>>,
    /// While set, each append waits for a permit of `gate`.
    gated: AtomicBool,
    gate: Semaphore,
    /// Appends with a record of this group wait for a permit of `gate`.
    held_group: Mutex<Option<String>>,
}

impl Default for TestWriter {
    fn default() -> Self {
        TestWriter {
            log: Mutex::default(),
            partitions: Mutex::default(),
            fail: Mutex::default(),
            gated: AtomicBool::new(false),
            gate: Semaphore::new(0),
            held_group: Mutex::default(),
        }
    }
}

impl TestWriter {
    fn records(&self) -> Vec<OffsetsRecord> {
        self.log.lock().unwrap().clone()
    }
    fn fail_with(&self, e: Option<OffsetsWriteError>) {
        *self.fail.lock().unwrap() = e;
    }
    fn hold_group(&self, group: &str) {
        *self.held_group.lock().unwrap() = Some(group.to_owned());
    }
    fn holds(&self, records: &[OffsetsRecord]) -> bool {
        let held = self.held_group.lock().unwrap();
        records.iter().any(|r| match r {
            OffsetsRecord::Offset { group, .. } | OffsetsRecord::Group { group, .. } => Some(group) == held.as_ref(),
        })
    }
}

impl OffsetsWriter for TestWriter {
    fn append<'a>(&'a self, partition: i32, records: &'a [OffsetsRecord]) -> AppendFuture<'a> {
        Box::pin(async move {
            if self.gated.load(Ordering::SeqCst) || self.holds(records) {
                self.gate.acquire().await.expect("gate open").forget();
            }
            if let Some(e) = *self.fail.lock().unwrap() {
                return Err(e);
            }
            self.log.lock().unwrap().extend_from_slice(records);
            self.partitions.lock().unwrap().push(partition);
            Ok(())
        })
    }
}

/// A coordinator of a one-partition `__consumer_offsets` that has loaded `records` as
/// partition 0, writing to `writer`.
fn loaded(writer: Arc<TestWriter>, records: Vec<OffsetsRecord>, now: i64) -> GroupCoordinator {
    let c = GroupCoordinator::new(GroupLimits::default(), 1000, 1, writer);
    c.load_partition(0, 0, records, now);
    c
}

fn coordinator() -> (GroupCoordinator, Arc<TestWriter>) {
    let w = Arc::new(TestWriter::default());
    (loaded(w.clone(), vec![], 0), w)
}

/// Poll a future once; `None` while it is pending.
fn poll_once<F: Future + Unpin>(f: &mut F) -> Option<F::Output> {
    match Pin::new(f).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}

fn co(offset: i64, ts: i64) -> CommittedOffset {
    CommittedOffset { offset, leader_epoch: -1, metadata: String::new(), commit_timestamp: ts }
}

fn oc(topic: &str, partition: i32, offset: i64) -> OffsetCommit {
    OffsetCommit { topic: topic.into(), partition, offset, leader_epoch: -1, metadata: String::new() }
}

fn params(instance: Option<&str>) -> JoinParams {
    JoinParams {
        member_id: String::new(),
        group_instance_id: instance.map(str::to_owned),
        client_id: "c".into(),
        client_host: "h".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::new())],
        require_known_member_id: false,
    }
}

fn sync_params(member_id: &str, assignments: Vec<(String, Bytes)>) -> SyncParams<'_> {
    SyncParams {
        member_id,
        generation_id: 1,
        group_instance_id: None,
        protocol_type: None,
        protocol_name: None,
        assignments,
    }
}

fn member(id: &str) -> MemberRef<'_> {
    MemberRef { member_id: id, generation_id: 1, group_instance_id: None }
}

/// One member, generation 1, CompletingRebalance (the leader has not synced yet).
async fn joined(c: &GroupCoordinator, instance: Option<&str>) -> String {
    joined_in(c, "g", instance).await
}

async fn joined_in(c: &GroupCoordinator, group: &str, instance: Option<&str>) -> String {
    let mut rx = c.join(group, params(instance), 0).await;
    assert!(rx.try_recv().is_err(), "the first join completes on a clock tick");
    c.tick(0).await;
    let joined = rx.try_recv().unwrap();
    assert_eq!(joined.generation_id, 1);
    joined.member_id
}

/// Two members, generation 1, CompletingRebalance: (leader, follower).
async fn two_joined(c: &GroupCoordinator) -> (JoinOutcome, JoinOutcome) {
    let mut a = c.join("g", params(None), 0).await;
    let mut b = c.join("g", params(None), 0).await;
    c.tick(0).await;
    let (a, b) = (a.try_recv().unwrap(), b.try_recv().unwrap());
    if a.leader == a.member_id {
        (a, b)
    } else {
        (b, a)
    }
}

async fn stable(c: &GroupCoordinator, instance: Option<&str>) -> String {
    stable_in(c, "g", instance).await
}

async fn stable_in(c: &GroupCoordinator, group: &str, instance: Option<&str>) -> String {
    let id = joined_in(c, group, instance).await;
    let mut rx = c.sync(group, sync_params(&id, vec![(id.clone(), Bytes::from_static(b"a"))]), 1).await;
    assert_eq!(rx.try_recv().unwrap().error, None);
    id
}

#[tokio::test]
async fn commits_survive_a_replay_and_deletes_leave_tombstones() {
    let (c, log) = coordinator();
    let r = c.commit_offsets("g", MemberRef::simple(), vec![oc("t", 0, 5), oc("t", 1, 7)], 10).await;
    assert_eq!(r, Ok(vec![Ok(()), Ok(())]));
    assert_eq!(
        c.fetch_offsets("g", Some(&[("t".into(), 1), ("t".into(), 9)])).unwrap(),
        vec![("t".into(), 1, Some(co(7, 10))), ("t".into(), 9, None)]
    );
    let (replayed, _) = coordinator();
    replayed.load_partition(0, 1, log.records(), 20);
    assert_eq!(replayed.fetch_offsets("g", None).unwrap().len(), 2);
    assert_eq!(replayed.list().unwrap().len(), 1);
    // The replayed coordinator writes to the first one's log.
    let replayed = loaded(log.clone(), log.records(), 20);
    replayed.delete_group("g", 30).await.unwrap();
    assert_eq!(replayed.delete_group("g", 30).await, Err(CoordinatorError::GroupIdNotFound));
    let (again, _) = coordinator();
    again.load_partition(0, 1, log.records(), 40);
    assert!(again.fetch_offsets("g", None).unwrap().is_empty());
    assert!(again.list().unwrap().is_empty());
}

#[tokio::test]
async fn deleting_a_topic_removes_its_offsets_durably() {
    let (c, log) = coordinator();
    c.commit_offsets("g", MemberRef::simple(), vec![oc("gone", 0, 5), oc("kept", 0, 6)], 10).await.unwrap();
    c.delete_topic_offsets("gone", 11).await.unwrap();
    assert_eq!(c.fetch_offsets("g", None).unwrap(), vec![("kept".into(), 0, Some(co(6, 10)))]);
    let (replayed, _) = coordinator();
    replayed.load_partition(0, 1, log.records(), 20);
    assert_eq!(replayed.fetch_offsets("g", None).unwrap(), vec![("kept".into(), 0, Some(co(6, 10)))]);
}

#[tokio::test]
async fn offsets_of_empty_groups_expire_after_retention() {
    let (c, log) = coordinator();
    c.commit_offsets("g", MemberRef::simple(), vec![oc("t", 0, 5)], 10).await.unwrap();
    c.tick(500).await;
    assert_eq!(c.fetch_offsets("g", None).unwrap().len(), 1);
    // A failed expiry write keeps the offsets; the next tick expires them.
    log.fail_with(Some(OffsetsWriteError::Storage));
    c.tick(1011).await;
    assert_eq!(c.fetch_offsets("g", None).unwrap().len(), 1);
    log.fail_with(None);
    c.tick(1012).await;
    assert!(c.fetch_offsets("g", None).unwrap().is_empty());
    assert!(matches!(log.records().last(), Some(OffsetsRecord::Offset { value: None, .. })));
}

#[tokio::test]
async fn simple_commits_are_refused_while_the_group_has_members() {
    let (c, _) = coordinator();
    let id = joined(&c, None).await;
    let refused = c.commit_offsets("g", MemberRef::simple(), vec![oc("t", 0, 1)], 1).await;
    assert_eq!(refused, Err(CoordinatorError::Group(GroupError::IllegalGeneration)));
    let refused = c.commit_offsets("g", member(&id), vec![oc("t", 0, 1)], 1).await;
    assert_eq!(refused, Err(CoordinatorError::Group(GroupError::RebalanceInProgress)));
    let mut rx = c.sync("g", sync_params(&id, vec![]), 2).await;
    assert!(rx.try_recv().unwrap().error.is_none());
    assert_eq!(c.commit_offsets("g", member(&id), vec![oc("t", 0, 1)], 3).await, Ok(vec![Ok(())]));
    assert_eq!(c.delete_group("g", 4).await, Err(CoordinatorError::NonEmptyGroup));
}

#[tokio::test]
async fn oversized_metadata_is_refused_per_partition_and_the_rest_commits() {
    let (c, log) = coordinator();
    let mut big = oc("t", 1, 9);
    big.metadata = "x".repeat(MAX_METADATA_BYTES + 1);
    let r = c.commit_offsets("g", MemberRef::simple(), vec![oc("t", 0, 5), big], 10).await;
    assert_eq!(r, Ok(vec![Ok(()), Err(CoordinatorError::OffsetMetadataTooLarge)]));
    assert_eq!(c.fetch_offsets("g", None).unwrap(), vec![("t".into(), 0, Some(co(5, 10)))]);
    assert_eq!(log.records().len(), 1);
}

#[tokio::test]
async fn a_failed_commit_write_is_an_error_and_not_visible() {
    let (c, log) = coordinator();
    log.fail_with(Some(OffsetsWriteError::Unavailable));
    let r = c.commit_offsets("g", MemberRef::simple(), vec![oc("t", 0, 5)], 10).await;
    assert_eq!(r, Err(CoordinatorError::Group(GroupError::Write(OffsetsWriteError::Unavailable))));
    assert_eq!(c.fetch_offsets("g", Some(&[("t".into(), 0)])).unwrap(), vec![("t".into(), 0, None)]);
    assert!(c.list().unwrap().is_empty(), "the group the commit would have created does not exist");
    log.fail_with(None);
    c.commit_offsets("g", MemberRef::simple(), vec![oc("t", 0, 6)], 11).await.unwrap();
    assert_eq!(c.fetch_offsets("g", None).unwrap(), vec![("t".into(), 0, Some(co(6, 11)))]);
}

#[tokio::test]
async fn a_failed_assignment_write_answers_every_syncing_member_with_the_error() {
    let (c, log) = coordinator();
    let (leader, follower) = two_joined(&c).await;
    let mut follower_rx = c.sync("g", sync_params(&follower.member_id, vec![]), 1).await;
    assert!(follower_rx.try_recv().is_err(), "the follower waits for the leader's assignment");
    log.fail_with(Some(OffsetsWriteError::Unavailable));
    let assignments = vec![(leader.member_id.clone(), Bytes::from_static(b"l"))];
    let mut leader_rx = c.sync("g", sync_params(&leader.member_id, assignments.clone()), 2).await;
    let failed = Some(GroupError::Write(OffsetsWriteError::Unavailable));
    assert_eq!(leader_rx.try_recv().unwrap().error, failed);
    assert_eq!(follower_rx.try_recv().unwrap().error, failed);
    // Nothing of the failed decision is visible (no member has an assignment, the group
    // is not Stable), nor in the log.
    let d = c.describe("g").unwrap().unwrap();
    assert_ne!(d.state, GroupState::Stable);
    assert!(d.members.iter().all(|m| m.assignment.is_empty()));
    assert!(log.records().is_empty());
}

#[tokio::test]
async fn a_failed_assignment_write_makes_the_group_rebalance() {
    let (c, log) = coordinator();
    let (leader, follower) = two_joined(&c).await;
    let mut follower_rx = c.sync("g", sync_params(&follower.member_id, vec![]), 1).await;
    log.fail_with(Some(OffsetsWriteError::Storage));
    let assignments = vec![
        (leader.member_id.clone(), Bytes::from_static(b"l")),
        (follower.member_id.clone(), Bytes::from_static(b"f")),
    ];
    let mut leader_rx = c.sync("g", sync_params(&leader.member_id, assignments.clone()), 2).await;
    let failed = Some(GroupError::Write(OffsetsWriteError::Storage));
    assert_eq!(leader_rx.try_recv().unwrap().error, failed);
    assert_eq!(follower_rx.try_recv().unwrap().error, failed);
    log.fail_with(None);
    // As Kafka's classic coordinator: the generation's assignment is given up and the
    // group prepares a rebalance, which the members learn from their next request.
    assert_eq!(c.describe("g").unwrap().unwrap().state, GroupState::PreparingRebalance);
    assert_eq!(c.heartbeat("g", &follower.member_id, 1, None, 3).await, Err(GroupError::RebalanceInProgress));
    let mut resync = c.sync("g", sync_params(&leader.member_id, assignments), 3).await;
    assert_eq!(resync.try_recv().unwrap().error, Some(GroupError::RebalanceInProgress));
    // Both rejoin: generation 2, then the leader's assignment is written and delivered.
    let rejoin = |id: &str| JoinParams { member_id: id.to_owned(), ..params(None) };
    let mut leader_join = c.join("g", rejoin(&leader.member_id), 4).await;
    let mut follower_join = c.join("g", rejoin(&follower.member_id), 4).await;
    let (leader_join, follower_join) = (leader_join.try_recv().unwrap(), follower_join.try_recv().unwrap());
    assert_eq!((leader_join.error, leader_join.generation_id), (None, 2));
    assert_eq!((follower_join.error, follower_join.generation_id), (None, 2));
    let mut follower_sync = sync_params(&follower.member_id, vec![]);
    follower_sync.generation_id = 2;
    let mut follower_rx = c.sync("g", follower_sync, 5).await;
    let assignments = vec![(follower.member_id.clone(), Bytes::from_static(b"f2"))];
    let mut leader_sync = sync_params(&leader_join.leader, assignments);
    leader_sync.generation_id = 2;
    let mut leader_rx = c.sync("g", leader_sync, 5).await;
    assert_eq!(leader_rx.try_recv().unwrap().error, None);
    assert_eq!(follower_rx.try_recv().unwrap().assignment, Bytes::from_static(b"f2"));
    assert_eq!(c.describe("g").unwrap().unwrap().state, GroupState::Stable);
    assert!(matches!(log.records().as_slice(), [OffsetsRecord::Group { value: Some(_), .. }]));
}

#[tokio::test]
async fn a_failed_static_rejoin_write_answers_the_join_with_the_error_and_keeps_the_old_member() {
    let (c, log) = coordinator();
    let old = stable(&c, Some("i")).await;
    log.fail_with(Some(OffsetsWriteError::Storage));
    let mut rx = c.join("g", params(Some("i")), 5).await;
    let outcome = rx.try_recv().unwrap();
    assert_eq!(outcome.error, Some(GroupError::Write(OffsetsWriteError::Storage)));
    let members: Vec<String> = c.describe("g").unwrap().unwrap().members.into_iter().map(|m| m.member_id).collect();
    assert_eq!(members, vec![old.clone()], "the old instance is not fenced by a join the log did not take");
    assert_eq!(c.heartbeat("g", &old, 1, Some("i"), 6).await, Ok(()));
}

#[tokio::test]
async fn answers_wait_for_their_write_and_later_decisions_wait_their_turn() {
    let (c, log) = coordinator();
    let id = joined(&c, None).await;
    log.gated.store(true, Ordering::SeqCst);
    let assignments = vec![(id.clone(), Bytes::from_static(b"a"))];
    let mut sync = Box::pin(c.sync("g", sync_params(&id, assignments), 1));
    assert!(poll_once(&mut sync).is_none(), "the leader's sync waits for its group record");
    // A commit taken now must see the group as the pending write leaves it (Stable), not
    // as it is (CompletingRebalance, which would refuse it).
    let mut commit = Box::pin(c.commit_offsets("g", member(&id), vec![oc("t", 0, 3)], 2));
    assert!(poll_once(&mut commit).is_none());
    assert_eq!(c.describe("g").unwrap().unwrap().state, GroupState::CompletingRebalance, "not claimed before written");
    log.gate.add_permits(1);
    let mut rx = sync.await;
    assert_eq!(rx.try_recv().unwrap().error, None);
    assert_eq!(c.describe("g").unwrap().unwrap().state, GroupState::Stable);
    assert!(poll_once(&mut commit).is_none(), "the commit's own write is still held");
    assert_eq!(c.fetch_offsets("g", None).unwrap(), vec![]);
    log.gate.add_permits(1);
    assert_eq!(commit.await, Ok(vec![Ok(())]));
    let kinds: Vec<bool> = log.records().iter().map(|r| matches!(r, OffsetsRecord::Group { .. })).collect();
    assert_eq!(kinds, vec![true, false], "the group record, then the offset");
}

#[tokio::test]
async fn a_static_rejoin_is_answered_only_after_its_write() {
    let (c, log) = coordinator();
    stable(&c, Some("i")).await;
    log.gated.store(true, Ordering::SeqCst);
    let mut join = Box::pin(c.join("g", params(Some("i")), 5));
    assert!(poll_once(&mut join).is_none(), "the replacement's member id is written first");
    log.gate.add_permits(1);
    let mut rx = join.await;
    let outcome = rx.try_recv().unwrap();
    assert_eq!(outcome.error, None);
    let members: Vec<String> = c.describe("g").unwrap().unwrap().members.into_iter().map(|m| m.member_id).collect();
    assert_eq!(members, vec![outcome.member_id]);
}

#[tokio::test]
async fn load_and_written_decisions_reach_the_same_state() {
    let (c, log) = coordinator();
    let id = stable(&c, Some("i")).await;
    c.commit_offsets(
        "g",
        MemberRef { member_id: &id, generation_id: 1, group_instance_id: Some("i") },
        vec![oc("t", 0, 4)],
        3,
    )
    .await
    .unwrap();
    let (replayed, _) = coordinator();
    replayed.load_partition(0, 1, log.records(), 3);
    let (live, back) = (c.describe("g").unwrap().unwrap(), replayed.describe("g").unwrap().unwrap());
    assert_eq!(
        (live.state, live.protocol_name, live.members.len()),
        (back.state, back.protocol_name, back.members.len())
    );
    assert_eq!(live.members[0].assignment, back.members[0].assignment);
    assert_eq!(c.fetch_offsets("g", None).unwrap(), replayed.fetch_offsets("g", None).unwrap());
}

#[tokio::test]
async fn a_write_held_for_one_group_holds_up_no_other_group() {
    let (c, log) = coordinator();
    let x = stable_in(&c, "x", None).await;
    let y = stable_in(&c, "y", None).await;
    log.hold_group("y");
    let mut y_commit = Box::pin(c.commit_offsets("y", member(&y), vec![oc("t", 0, 1)], 2));
    assert!(poll_once(&mut y_commit).is_none(), "y's commit waits for its write");
    // Group x decides, writes and answers while y's write is held.
    let mut x_commit = Box::pin(c.commit_offsets("x", member(&x), vec![oc("t", 0, 7)], 3));
    assert_eq!(poll_once(&mut x_commit), Some(Ok(vec![Ok(())])));
    assert_eq!(c.fetch_offsets("x", None).unwrap(), vec![("t".into(), 0, Some(co(7, 3)))]);
    let mut x_join = Box::pin(c.join("x", params(None), 3));
    assert!(poll_once(&mut x_join).is_some(), "x's join is decided without waiting for y");
    // Heartbeats write nothing and wait for no write, not even their own group's.
    let mut x_beat = Box::pin(c.heartbeat("x", &x, 1, None, 4));
    assert_eq!(poll_once(&mut x_beat), Some(Err(GroupError::RebalanceInProgress)));
    let mut y_beat = Box::pin(c.heartbeat("y", &y, 1, None, 4));
    assert_eq!(poll_once(&mut y_beat), Some(Ok(())));
    // y's own decisions still wait their turn behind its held write.
    let mut y_commit_2 = Box::pin(c.commit_offsets("y", member(&y), vec![oc("t", 0, 2)], 5));
    assert!(poll_once(&mut y_commit_2).is_none());
    log.gate.add_permits(1);
    assert_eq!(y_commit.await, Ok(vec![Ok(())]));
    log.gate.add_permits(1);
    assert_eq!(y_commit_2.await, Ok(vec![Ok(())]));
    assert_eq!(c.fetch_offsets("y", None).unwrap(), vec![("t".into(), 0, Some(co(2, 5)))]);
}

#[tokio::test]
async fn the_clock_expires_one_group_while_another_groups_write_is_held() {
    let (c, log) = coordinator();
    stable_in(&c, "x", None).await;
    let y = stable_in(&c, "y", None).await;
    log.hold_group("y");
    let mut y_commit = Box::pin(c.commit_offsets("y", member(&y), vec![oc("t", 0, 1)], 2));
    assert!(poll_once(&mut y_commit).is_none());
    // Past x's session: x's member expires and x is written Empty, while the tick's turn
    // for y waits behind y's held write.
    let mut tick = Box::pin(c.tick(20_000));
    assert!(poll_once(&mut tick).is_none(), "y's part of the tick waits its turn");
    assert_eq!(c.describe("x").unwrap().unwrap().state, GroupState::Empty);
    assert_eq!(c.describe("y").unwrap().unwrap().state, GroupState::Stable);
    log.gate.add_permits(2);
    assert_eq!(y_commit.await, Ok(vec![Ok(())]));
    tick.await;
    assert_eq!(c.describe("y").unwrap().unwrap().state, GroupState::Empty, "y's member expired too, in y's turn");
}

#[tokio::test]
async fn a_heartbeat_during_a_groups_write_is_not_lost_when_the_write_applies() {
    let (c, log) = coordinator();
    let id = joined(&c, None).await;
    log.hold_group("g");
    // The leader's sync decides on a copy of the group with the session as of time 1.
    let assignments = vec![(id.clone(), Bytes::from_static(b"a"))];
    let mut sync = Box::pin(c.sync("g", sync_params(&id, assignments), 1));
    assert!(poll_once(&mut sync).is_none(), "the sync waits for its group record");
    assert_eq!(c.heartbeat("g", &id, 1, None, 9_000).await, Ok(()));
    log.gate.add_permits(1);
    assert_eq!(sync.await.try_recv().unwrap().error, None);
    *log.held_group.lock().unwrap() = None;
    // Session 10 s: expired at 10_001 if counted from the sync, alive if from the beat.
    c.tick(15_000).await;
    assert_eq!(c.describe("g").unwrap().unwrap().members.len(), 1, "the heartbeat at 9 s kept the member");
    c.tick(19_000).await;
    assert!(c.describe("g").unwrap().unwrap().members.is_empty());
}

/// What a JoinGroup runs after its decision: its own group's clock, so a new group's
/// initial join with no delay completes at once; other groups are not ticked.
#[tokio::test]
async fn a_joins_own_tick_completes_a_new_groups_initial_join() {
    let (c, _log) = coordinator();
    let mut other = c.join("other", params(None), 0).await;
    let mut rx = c.join("g", params(None), 0).await;
    assert!(rx.try_recv().is_err(), "the join decision alone does not complete it");
    c.tick_group("g", 0).await;
    let joined = rx.try_recv().unwrap();
    assert_eq!((joined.generation_id, joined.error), (1, None));
    assert!(other.try_recv().is_err(), "another group's initial join waits for its own tick");
}

// ---- Partitions: groups are served by the partition they hash to ----
// Of 50 partitions, "g" hashes to 3 and "g1" to 42 (see `group_partition`).

fn of_50(w: &Arc<TestWriter>) -> GroupCoordinator {
    GroupCoordinator::new(GroupLimits::default(), 1000, 50, w.clone())
}

#[tokio::test]
async fn each_group_is_served_by_its_own_partition_and_written_to_it() {
    let w = Arc::new(TestWriter::default());
    let c = of_50(&w);
    let simple = MemberRef::simple();
    assert_eq!(c.commit_offsets("g", simple, vec![oc("t", 0, 1)], 1).await, Err(GroupError::NotCoordinator.into()));
    c.load_partition(3, 0, vec![], 1);
    c.commit_offsets("g", simple, vec![oc("t", 0, 5)], 2).await.unwrap();
    assert_eq!(*w.partitions.lock().unwrap(), vec![3]);
    assert_eq!(c.fetch_offsets("g1", None), Err(GroupError::NotCoordinator));
    assert_eq!(c.heartbeat("g1", "m", 1, None, 2).await, Err(GroupError::NotCoordinator));
    // Partition 42 comes with g1's offsets in its log; loading it replays only those.
    let g1 = OffsetsRecord::Offset { group: "g1".into(), topic: "t".into(), partition: 0, value: Some(co(9, 2)) };
    c.load_partition(42, 4, vec![g1], 3);
    assert_eq!(c.fetch_offsets("g1", None).unwrap(), vec![("t".into(), 0, Some(co(9, 2)))]);
    let listed: Vec<String> = c.list().unwrap().into_iter().map(|g| g.group_id).collect();
    assert_eq!(listed, vec!["g", "g1"]);
    assert_eq!(c.metrics_view().committed.len(), 2, "metrics see the groups of every partition");
    // Losing partition 3 loses g, not g1.
    c.on_resignation(3);
    assert_eq!(c.describe("g").err(), Some(GroupError::NotCoordinator));
    assert!(c.describe("g1").unwrap().is_some());
    assert_eq!(c.owned_partitions(), vec![(42, 4)]);
}

#[tokio::test]
async fn a_loading_partition_answers_load_in_progress() {
    let w = Arc::new(TestWriter::default());
    let c = of_50(&w);
    let load = c.on_election(3, 1).unwrap();
    assert_eq!(c.fetch_offsets("g", None), Err(GroupError::CoordinatorLoadInProgress));
    let mut rx = c.join("g", params(None), 0).await;
    assert_eq!(rx.try_recv().unwrap().error, Some(GroupError::CoordinatorLoadInProgress));
    assert_eq!(c.list().err(), Some(GroupError::CoordinatorLoadInProgress));
    c.complete_load(load, vec![], 1);
    assert_eq!(c.fetch_offsets("g", None), Ok(vec![]));
    assert!(c.list().unwrap().is_empty());
}

#[tokio::test]
async fn resigning_answers_parked_joins_and_drops_decisions_in_flight() {
    let w = Arc::new(TestWriter::default());
    let c = of_50(&w);
    c.load_partition(3, 0, vec![], 0);
    let mut rx = c.join("g", params(None), 0).await;
    assert!(rx.try_recv().is_err(), "parked until the clock completes the join");
    assert_eq!(c.on_election(3, 0), None, "loaded in that epoch already");
    assert!(rx.try_recv().is_err(), "still parked");
    c.on_resignation(3);
    assert_eq!(rx.try_recv().unwrap().error, Some(GroupError::NotCoordinator));
    // A commit whose write is under way when the partition moves is not applied here.
    c.load_partition(3, 1, vec![], 0);
    w.hold_group("g");
    let mut commit = Box::pin(c.commit_offsets("g", MemberRef::simple(), vec![oc("t", 0, 5)], 1));
    assert!(poll_once(&mut commit).is_none());
    c.on_resignation(3);
    c.load_partition(3, 2, vec![], 2);
    w.gate.add_permits(1);
    assert_eq!(commit.await, Err(GroupError::NotCoordinator.into()));
    assert_eq!(c.fetch_offsets("g", None), Ok(vec![]), "the new load did not see it (its log would have)");
}

#[tokio::test]
async fn a_new_partition_count_moves_groups() {
    let w = Arc::new(TestWriter::default());
    let c = of_50(&w);
    c.load_partition(3, 0, vec![], 0);
    assert_eq!(c.partition_for("g1"), 42);
    c.set_partition_count(1);
    assert!(c.owned_partitions().is_empty());
    assert_eq!(c.partition_for("g1"), 0);
}
