//! Replication between `ReplicaManager`s in one process: hand-made metadata images, the
//! real fetchers, and a [`LeaderEndpoint`] that calls the leader's own replica-fetch code
//! (`ReplicaManager::fetch_for_replica`) instead of going over TCP. No timing decides a
//! result: tests poll for a condition until a generous deadline.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use tokio::time::Instant;
use uuid::Uuid;

use super::isr_sink::NotCommitted;
use super::leader_endpoint::{EndpointError, EndpointFuture, LeaderEndpoint, LeaderEndpoints};
use super::replica_fetch::{FetchedData, FetchedPartition, ReplicaFetchError, ReplicaFetchRequest};
use super::{Acks, FetcherManager, Partition, PartitionError, ReplicaManager};
use crate::config::BrokerConfig;
use crate::controller::{MetadataImage, MetadataRecord};
use crate::protocol::context::system_clock;
use crate::storage::test_util::{build_records_batch, TestRecord};

const TOPIC: &str = "t";
const TOPIC_ID: Uuid = Uuid::from_u128(0x7);
const PATIENCE: Duration = Duration::from_secs(20);

/// The brokers of the test cluster, so an endpoint can reach its leader's code.
#[derive(Default, Clone)]
struct Cluster {
    nodes: Arc<Mutex<HashMap<i32, Arc<ReplicaManager>>>>,
}

impl LeaderEndpoints for Cluster {
    fn endpoint(&self, leader: i32) -> Arc<dyn LeaderEndpoint> {
        Arc::new(InProcess { cluster: self.clone(), leader })
    }
}

struct InProcess {
    cluster: Cluster,
    leader: i32,
}

impl LeaderEndpoint for InProcess {
    fn fetch(&self, request: ReplicaFetchRequest) -> EndpointFuture<'_, Result<Vec<FetchedPartition>, EndpointError>> {
        Box::pin(async move {
            let leader = self.cluster.nodes.lock().unwrap().get(&self.leader).cloned();
            let leader = leader.ok_or(EndpointError::UnknownLeader(self.leader))?;
            let reads = leader.fetch_for_replica(&request, leader.now_ms()).await;
            let mut out = Vec::new();
            for (asked, read) in request.partitions.iter().zip(reads) {
                let result = match read.result {
                    Ok(r) => Ok(FetchedData {
                        records: r.records.read()?,
                        high_watermark: r.high_watermark,
                        log_start_offset: r.log_start_offset,
                        diverging_epoch: r.diverging_epoch,
                    }),
                    Err(e) => Err(ReplicaFetchError::of(&e)),
                };
                out.push(FetchedPartition { topic_id: asked.topic_id, partition: asked.partition, result });
            }
            Ok(out)
        })
    }
}

struct Node {
    manager: Arc<ReplicaManager>,
    fetchers: Option<FetcherManager>,
}

impl Node {
    fn partition(&self) -> Arc<Partition> {
        self.manager.partition(&TOPIC_ID, 0).expect("a replica of the partition")
    }

    fn start_fetching(&mut self, cluster: &Cluster) {
        self.fetchers = Some(FetcherManager::start(self.manager.clone(), Arc::new(cluster.clone())));
    }

    async fn stop_fetching(&mut self) {
        if let Some(f) = self.fetchers.take() {
            f.shutdown().await;
        }
    }
}

/// Partition 0 of [`TOPIC`]: `replicas`, all in sync, led by `leader` in `epoch`.
fn image(replicas: &[i32], leader: i32, epoch: i32) -> MetadataImage {
    let mut image = MetadataImage::default();
    for node_id in replicas {
        image.apply(&MetadataRecord::RegisterBroker {
            node_id: *node_id,
            host: "127.0.0.1".into(),
            port: 9000 + *node_id as u16,
            rack: None,
            inter_broker: None,
            incarnation: None,
            metadata_format: crate::controller::records::METADATA_FORMAT,
        });
    }
    image.apply(&MetadataRecord::Topic { name: TOPIC.into(), topic_id: TOPIC_ID });
    image.apply(&MetadataRecord::Partition {
        topic_id: TOPIC_ID,
        partition: 0,
        replicas: replicas.to_vec(),
        isr: replicas.to_vec(),
        leader,
        leader_epoch: epoch,
        partition_epoch: epoch,
        adding_replicas: vec![],
        removing_replicas: vec![],
        eligible_leader_replicas: Vec::new(),
        last_known_elr: Vec::new(),
    });
    image
}

/// `image` with ISR = [1] only: replica 2 is catching up.
fn catching_up(replicas: &[i32]) -> MetadataImage {
    let mut image = image(replicas, 1, 0);
    image.apply(&MetadataRecord::Partition {
        topic_id: TOPIC_ID,
        partition: 0,
        replicas: replicas.to_vec(),
        isr: vec![1],
        leader: 1,
        leader_epoch: 0,
        partition_epoch: 1,
        adding_replicas: vec![],
        removing_replicas: vec![],
        eligible_leader_replicas: Vec::new(),
        last_known_elr: Vec::new(),
    });
    image
}

/// One broker per replica, each with the image applied and its fetchers running.
fn cluster(dir: &Path, image: &MetadataImage, replicas: &[i32]) -> (Cluster, HashMap<i32, Node>) {
    let cluster = Cluster::default();
    let mut nodes = HashMap::new();
    for &node_id in replicas {
        add_node(&cluster, &mut nodes, dir, image, node_id);
    }
    (cluster, nodes)
}

/// Broker `node_id` (broker epoch 1000 + `node_id`) joins, with `image` applied and
/// its fetchers running.
fn add_node(cluster: &Cluster, nodes: &mut HashMap<i32, Node>, dir: &Path, image: &MetadataImage, node_id: i32) {
    let mut broker = BrokerConfig::build(&[]).unwrap();
    broker.node_id = node_id;
    broker.data_dir = dir.join(format!("broker-{node_id}"));
    let manager = Arc::new(ReplicaManager::new(&broker, system_clock()).unwrap());
    manager.set_broker_epoch(1000 + i64::from(node_id));
    manager.apply_image(image, manager.now_ms()).unwrap();
    cluster.nodes.lock().unwrap().insert(node_id, manager.clone());
    let mut node = Node { manager, fetchers: None };
    node.start_fetching(cluster);
    nodes.insert(node_id, node);
}

/// A batch of `n` records whose values name `tag`.
fn batch(tag: &str, n: usize, now_ms: i64) -> BytesMut {
    let values: Vec<String> = (0..n).map(|i| format!("{tag}-{i}")).collect();
    let records: Vec<TestRecord> =
        values.iter().map(|v| TestRecord { key: None, value: Some(v.as_bytes()), timestamp: now_ms }).collect();
    BytesMut::from(&build_records_batch(0, &records, -1)[..])
}

async fn produce(node: &Node, tag: &str, acks: Acks, timeout: Duration) -> Result<(i64, i64), PartitionError> {
    let now = node.manager.now_ms();
    let p = node.partition();
    let r = node.manager.append(&p, batch(tag, 3, now), acks, Instant::now() + timeout, now).await?;
    Ok((r.base_offset, r.last_offset))
}

/// Polls `cond` until it holds; fails the test after [`PATIENCE`].
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn in_sync(nodes: &HashMap<i32, Node>, leader: i32, followers: &[i32]) -> bool {
    let want = nodes[&leader].partition().log_bytes();
    followers.iter().all(|f| nodes[f].partition().log_bytes() == want)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_copy_the_leader_log_byte_for_byte_and_follow_its_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let (_cluster, mut nodes) = cluster(dir.path(), &image(&[1, 2, 3], 1, 0), &[1, 2, 3]);
    assert!(nodes[&1].partition().is_leader());
    assert!(!nodes[&2].partition().is_leader() && !nodes[&3].partition().is_leader());
    for i in 0..20 {
        produce(&nodes[&1], &format!("r{i}"), Acks::Leader, PATIENCE).await.unwrap();
    }
    eventually("followers hold the leader's log", || in_sync(&nodes, 1, &[2, 3])).await;
    let leader = nodes[&1].partition();
    assert_eq!(leader.log_end_offset(), 60);
    for f in [2, 3] {
        let p = nodes[&f].partition();
        assert_eq!(p.log_end_offset(), 60, "same offsets on follower {f}");
        assert_eq!(p.log_end_offset_for_epoch(0), Some((0, 60)), "same leader epochs on follower {f}");
    }
    // The leader's high watermark reaches the end once both fetched from there, and the
    // followers learn it on their next fetch.
    eventually("the high watermark reaches the log end", || leader.high_watermark() == 60).await;
    eventually("followers learn the high watermark", || {
        [2, 3].iter().all(|f| nodes[f].partition().high_watermark() == 60)
    })
    .await;
    // A follower refuses produces, and consumer fetches that must go to the leader; it
    // serves a consumer that may read from any replica (KIP-392) up to its high watermark.
    let err = produce(&nodes[&2], "nope", Acks::Leader, PATIENCE).await.unwrap_err();
    assert!(matches!(err, PartitionError::NotLeaderOrFollower), "{err}");
    assert!(matches!(nodes[&2].partition().fetch(0, 1 << 20), Err(PartitionError::NotLeaderOrFollower)));
    let follower_read = nodes[&2].partition().fetch_from_any_replica(0, 1 << 20).unwrap();
    assert_eq!(follower_read.high_watermark, 60);
    assert_eq!(follower_read.records.read().unwrap(), leader.fetch(0, 1 << 20).unwrap().records.read().unwrap());
    // The leader sends a consumer in follower 3's rack there, and keeps the others.
    let racks = |id: i32| Some(Some(["a", "b", "c"][(id - 1) as usize].to_owned()));
    let now = nodes[&1].manager.now_ms();
    assert_eq!(leader.preferred_read_replica("c", 10, now, racks), Some(3));
    assert_eq!(leader.preferred_read_replica("a", 10, now, racks), None, "the leader's own rack");
    assert_eq!(leader.preferred_read_replica("", 10, now, racks), None, "no client rack");
    assert_eq!(leader.preferred_read_replica("c", 61, now, racks), None, "past the follower's log end");
    assert_eq!(
        leader.preferred_read_replica("c", 10, now, |id| (id != 3).then(|| racks(id)).flatten()),
        None,
        "3 is not live"
    );
    assert_eq!(nodes[&2].partition().preferred_read_replica("c", 10, now, racks), None, "only a leader chooses");
    for n in nodes.values_mut() {
        n.stop_fetching().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_waits_for_every_in_sync_follower_and_consumers_never_see_past_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, mut nodes) = cluster(dir.path(), &image(&[1, 2, 3], 1, 0), &[1, 2, 3]);
    let (_, last) = produce(&nodes[&1], "a", Acks::All, PATIENCE).await.unwrap();
    // Answered: so every follower fetched from past the write.
    for f in [2, 3] {
        assert!(nodes[&f].partition().log_end_offset() > last, "follower {f} has the write");
    }

    // Follower 3 stops fetching (still in the ISR: nobody shrinks it here).
    nodes.get_mut(&3).unwrap().stop_fetching().await;
    let held = nodes[&3].partition().log_end_offset();
    let err = produce(&nodes[&1], "b", Acks::All, Duration::from_millis(300)).await.unwrap_err();
    assert!(matches!(err, PartitionError::ReplicationTimedOut(_)), "{err}");
    let leader = nodes[&1].partition();
    assert_eq!(leader.log_end_offset(), held + 3, "the write stays in the leader's log");
    eventually("follower 2 has the write", || nodes[&2].partition().log_end_offset() == held + 3).await;
    // More writes while follower 2 keeps up: the high watermark stays at what 3 holds,
    // and never passes what every in-sync replica holds.
    for i in 0..5 {
        produce(&nodes[&1], &format!("c{i}"), Acks::Leader, PATIENCE).await.unwrap();
        let hw = leader.high_watermark();
        let held_by_all = [2, 3].iter().map(|f| nodes[f].partition().log_end_offset()).min().unwrap();
        assert!(hw <= held_by_all, "high watermark {hw} past what the ISR holds ({held_by_all})");
    }
    assert_eq!(leader.high_watermark(), held);
    // A consumer reading from the high watermark gets nothing; from below it, only below.
    let read = leader.fetch(held, 1 << 20).unwrap();
    assert!(read.records.is_empty());
    let read = leader.fetch(0, 1 << 20).unwrap().records.read().unwrap();
    let batches = crate::storage::validate_batches(&read, usize::MAX).unwrap();
    assert!(batches.iter().all(|b| b.last_offset() < held), "a consumer saw past the high watermark");

    // Follower 3 comes back: it catches up and the high watermark reaches the end.
    nodes.get_mut(&3).unwrap().start_fetching(&cluster);
    let end = leader.log_end_offset();
    eventually("the high watermark reaches the log end", || leader.high_watermark() == end).await;
    assert!(in_sync(&nodes, 1, &[2, 3]));
    for n in nodes.values_mut() {
        n.stop_fetching().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_makes_the_old_leader_drop_the_tail_it_never_got() {
    // KIP-101: broker 1 led epoch 0 and wrote records that broker 2 never fetched; 2 is
    // elected in epoch 1 and writes its own. Broker 1, now a follower, must truncate its
    // tail and end up with 2's log exactly.
    let dir = tempfile::tempdir().unwrap();
    let (_cluster, mut nodes) = cluster(dir.path(), &image(&[1, 2], 1, 0), &[1, 2]);
    for i in 0..4 {
        produce(&nodes[&1], &format!("both{i}"), Acks::All, PATIENCE).await.unwrap();
    }
    eventually("follower 2 holds the log", || in_sync(&nodes, 1, &[2])).await;
    nodes.get_mut(&2).unwrap().stop_fetching().await;
    for i in 0..3 {
        produce(&nodes[&1], &format!("lost{i}"), Acks::Leader, PATIENCE).await.unwrap();
    }
    let common = nodes[&2].partition().log_end_offset();
    assert_eq!(common, 12);
    assert_eq!(nodes[&1].partition().log_end_offset(), 21);

    // The election: 2 leads epoch 1 (1 is still a replica).
    let elected = image(&[1, 2], 2, 1);
    for n in nodes.values() {
        n.manager.apply_image(&elected, n.manager.now_ms()).unwrap();
    }
    assert!(nodes[&2].partition().is_leader());
    assert!(!nodes[&1].partition().is_leader());
    nodes.get_mut(&2).unwrap().stop_fetching().await;
    for i in 0..2 {
        produce(&nodes[&2], &format!("new{i}"), Acks::Leader, PATIENCE).await.unwrap();
    }
    eventually("the old leader holds exactly the new leader's log", || in_sync(&nodes, 2, &[1])).await;
    let old = nodes[&1].partition();
    assert_eq!(old.log_end_offset(), 18);
    assert_eq!(old.log_end_offset_for_epoch(0), Some((0, 12)), "epoch 0 ends where the new leader's did");
    assert_eq!(old.log_end_offset_for_epoch(1), Some((1, 18)));
    let bytes = old.log_bytes();
    assert!(!bytes.windows(4).any(|w| w == b"lost"), "the tail the new leader never got is gone");
    // And the new leader's high watermark covers the follower's copy.
    let leader = nodes[&2].partition();
    eventually("the new leader's high watermark reaches its end", || leader.high_watermark() == 18).await;
    for n in nodes.values_mut() {
        n.stop_fetching().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_waiting_for_followers_fails_when_its_leader_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let (_cluster, mut nodes) = cluster(dir.path(), &image(&[1, 2], 1, 0), &[1, 2]);
    nodes.get_mut(&2).unwrap().stop_fetching().await;
    let leader = nodes[&1].manager.clone();
    let write = tokio::spawn(async move {
        let now = leader.now_ms();
        let p = leader.partition(&TOPIC_ID, 0).unwrap();
        leader.append(&p, batch("w", 1, now), Acks::All, Instant::now() + PATIENCE, now).await
    });
    eventually("the write waits for follower 2", || nodes[&1].manager.purgatory().parked() > 0).await;
    let elected = image(&[1, 2], 2, 1);
    nodes[&1].manager.apply_image(&elected, nodes[&1].manager.now_ms()).unwrap();
    let err = write.await.unwrap().unwrap_err();
    assert!(matches!(err, PartitionError::NotLeaderOrFollower), "{err}");
    nodes.get_mut(&1).unwrap().stop_fetching().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_leader_exposes_nothing_its_followers_have_not_confirmed() {
    let dir = tempfile::tempdir().unwrap();
    let img = image(&[1, 2], 1, 0);
    let (_cluster, mut nodes) = cluster(dir.path(), &img, &[1, 2]);
    nodes.get_mut(&2).unwrap().stop_fetching().await;
    for i in 0..3 {
        produce(&nodes[&1], &format!("u{i}"), Acks::Leader, PATIENCE).await.unwrap();
    }
    assert_eq!(nodes[&1].partition().high_watermark(), 0, "follower 2 has nothing yet");
    nodes.get_mut(&1).unwrap().stop_fetching().await;
    nodes.remove(&1);
    // Broker 1 restarts (it wrote no high watermark checkpoint).
    let mut broker = BrokerConfig::build(&[]).unwrap();
    broker.data_dir = dir.path().join("broker-1");
    let manager = Arc::new(ReplicaManager::new(&broker, system_clock()).unwrap());
    manager.apply_image(&img, manager.now_ms()).unwrap();
    let p = manager.partition(&TOPIC_ID, 0).unwrap();
    assert_eq!(p.log_end_offset(), 9);
    assert_eq!(p.high_watermark(), 0, "a restart does not expose the unreplicated tail");
    assert!(p.fetch(0, 1 << 20).unwrap().records.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_leader_serves_up_to_its_checkpointed_high_watermark_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let img = image(&[1, 2], 1, 0);
    let (_cluster, mut nodes) = cluster(dir.path(), &img, &[1, 2]);
    for i in 0..3 {
        produce(&nodes[&1], &format!("c{i}"), Acks::All, PATIENCE).await.unwrap();
    }
    assert_eq!(nodes[&1].partition().high_watermark(), 9);
    // The follower stops: a tail the ISR never confirmed.
    nodes.get_mut(&2).unwrap().stop_fetching().await;
    produce(&nodes[&1], "tail", Acks::Leader, PATIENCE).await.unwrap();
    assert_eq!((nodes[&1].partition().high_watermark(), nodes[&1].partition().log_end_offset()), (9, 12));
    nodes[&1].manager.checkpoint_high_watermarks();
    let broker_dir = dir.path().join("broker-1");
    let checkpoint = broker_dir.join(super::replica_manager::HIGH_WATERMARK_CHECKPOINT_FILE);
    assert_eq!(std::fs::read_to_string(&checkpoint).unwrap(), "0\n1\nt 0 9\n");
    nodes.get_mut(&1).unwrap().stop_fetching().await;
    nodes.remove(&1);

    let restart = || {
        let mut broker = BrokerConfig::build(&[]).unwrap();
        broker.data_dir = broker_dir.clone();
        let manager = Arc::new(ReplicaManager::new(&broker, system_clock()).unwrap());
        manager.apply_image(&img, manager.now_ms()).unwrap();
        manager.partition(&TOPIC_ID, 0).unwrap()
    };
    // Leader again, its follower silent: what the ISR had confirmed is served at once,
    // the unconfirmed tail is not.
    let p = restart();
    assert_eq!((p.high_watermark(), p.log_end_offset()), (9, 12));
    let read = p.fetch(0, 1 << 20).unwrap();
    assert_eq!(read.high_watermark, 9);
    assert!(!read.records.is_empty());
    assert!(p.fetch(9, 1 << 20).unwrap().records.is_empty(), "nothing past the high watermark");
    drop(p);
    // A checkpoint that does not parse is ignored (logged): back to the log start.
    std::fs::write(&checkpoint, "0\n1\nt 0\n").unwrap();
    assert_eq!(restart().high_watermark(), 0);
}

/// A topic deleted and created again under its name must not inherit the old topic's
/// checkpointed high watermark: the deletion drops the entry and asks for a rewrite at
/// once, and a file left from before a restart is rewritten even with nothing to list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_partition_leaves_the_high_watermark_checkpoint_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = BrokerConfig::build(&[]).unwrap();
    broker.data_dir = dir.path().to_path_buf();
    let checkpoint = dir.path().join(super::replica_manager::HIGH_WATERMARK_CHECKPOINT_FILE);
    let img = image(&[1], 1, 0);
    let manager = Arc::new(ReplicaManager::new(&broker, system_clock()).unwrap());
    manager.apply_image(&img, manager.now_ms()).unwrap();
    let p = manager.partition(&TOPIC_ID, 0).unwrap();
    let now = manager.now_ms();
    manager.append(&p, batch("d", 4, now), Acks::Leader, Instant::now() + PATIENCE, now).await.unwrap();
    manager.checkpoint_high_watermarks();
    assert_eq!(std::fs::read_to_string(&checkpoint).unwrap(), "0\n1\nt 0 4\n");

    let mut gone = img.clone();
    gone.apply(&MetadataRecord::RemoveTopic { topic_id: TOPIC_ID });
    manager.apply_image(&gone, manager.now_ms()).unwrap();
    tokio::time::timeout(PATIENCE, manager.high_watermark_checkpoint_due()).await.expect("a rewrite is due");
    manager.checkpoint_high_watermarks();
    assert_eq!(std::fs::read_to_string(&checkpoint).unwrap(), "0\n0\n");

    // A restart that finds an old file naming a partition that is gone rewrites it.
    std::fs::write(&checkpoint, "0\n1\nt 0 4\n").unwrap();
    drop((p, manager));
    let manager = Arc::new(ReplicaManager::new(&broker, system_clock()).unwrap());
    manager.apply_image(&gone, manager.now_ms()).unwrap();
    manager.checkpoint_high_watermarks();
    assert_eq!(std::fs::read_to_string(&checkpoint).unwrap(), "0\n0\n");
}

/// Records what the leaders propose.
#[derive(Default)]
struct Proposals(Mutex<Vec<super::IsrChange>>);

impl super::IsrChangeSink for Proposals {
    fn propose(&self, change: super::IsrChange) {
        self.0.lock().unwrap().push(change);
    }
}

/// KIP-903: a follower's fetches carry its process's broker epoch, and the leader's
/// proposal to let it into the ISR names that process, so the controller can refuse it
/// if the process has been replaced since.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_is_proposed_for_the_isr_with_the_broker_epoch_its_fetches_carry() {
    use super::isr::IsrProposal;

    let dir = tempfile::tempdir().unwrap();
    let img = catching_up(&[1, 2]);
    let (cluster, mut nodes) = cluster(dir.path(), &img, &[1]);
    let sink = Arc::new(Proposals::default());
    nodes[&1].manager.set_isr_sink(sink.clone());
    add_node(&cluster, &mut nodes, dir.path(), &img, 2);
    eventually("follower 2 is proposed for the ISR", || !sink.0.lock().unwrap().is_empty()).await;
    let proposed: Vec<IsrProposal> = sink.0.lock().unwrap().drain(..).map(|c| c.proposal).collect();
    assert_eq!(proposed, vec![IsrProposal::Expand { add: 2, broker_epoch: 1002 }]);
    for n in nodes.values_mut() {
        n.stop_fetching().await;
    }
}

#[test]
fn lagging_followers_are_proposed_out_of_the_isr_once_and_caught_up_ones_back_in() {
    use std::sync::atomic::{AtomicI64, Ordering};

    use super::isr::IsrProposal;
    use super::replica_manager::REPLICA_LAG_TIME_MAX_MS;

    let dir = tempfile::tempdir().unwrap();
    let now = Arc::new(AtomicI64::new(1_000));
    let clock = now.clone();
    let mut broker = BrokerConfig::build(&[]).unwrap();
    broker.data_dir = dir.path().to_owned();
    let manager = ReplicaManager::new(&broker, Arc::new(move || clock.load(Ordering::SeqCst))).unwrap();
    let sink = Arc::new(Proposals::default());
    manager.set_isr_sink(sink.clone());
    manager.apply_image(&image(&[1, 2, 3], 1, 0), 1_000).unwrap();
    let p = manager.partition(&TOPIC_ID, 0).unwrap();
    let mut records =
        super::ValidatedRecords::validate(batch("x", 2, 1_000), &p.config().produce_limits(1_000)).unwrap();
    manager.append_validated(&p, &mut records, 1_000).unwrap();

    // Follower 2 keeps up; follower 3 never fetches.
    manager.follower_fetched(&p, 2, 2, 20_000);
    manager.check_isr_lag(1_000 + REPLICA_LAG_TIME_MAX_MS);
    assert!(sink.0.lock().unwrap().is_empty(), "within the lag window");
    manager.check_isr_lag(1_001 + REPLICA_LAG_TIME_MAX_MS);
    manager.check_isr_lag(2_000 + REPLICA_LAG_TIME_MAX_MS);
    let proposed: Vec<IsrProposal> = sink.0.lock().unwrap().drain(..).map(|c| c.proposal).collect();
    assert_eq!(proposed, vec![IsrProposal::Shrink { remove: vec![3] }], "proposed once");

    // The controller commits the shrink; follower 3 then catches up and is proposed back.
    let mut shrunk = image(&[1, 2, 3], 1, 0);
    shrunk.apply(&MetadataRecord::Partition {
        topic_id: TOPIC_ID,
        partition: 0,
        replicas: vec![1, 2, 3],
        isr: vec![1, 2],
        leader: 1,
        leader_epoch: 0,
        partition_epoch: 1,
        adding_replicas: vec![],
        removing_replicas: vec![],
        eligible_leader_replicas: Vec::new(),
        last_known_elr: Vec::new(),
    });
    manager.apply_image(&shrunk, 40_000).unwrap();
    assert_eq!(p.high_watermark(), 2, "no longer held back by follower 3");
    manager.follower_fetched(&p, 3, 1, 41_000);
    assert!(sink.0.lock().unwrap().is_empty(), "below the high watermark: not back yet");
    manager.follower_fetched(&p, 3, 2, 42_000);
    let changes: Vec<super::IsrChange> = sink.0.lock().unwrap().drain(..).collect();
    assert_eq!(
        changes.iter().map(|c| c.proposal.clone()).collect::<Vec<_>>(),
        vec![IsrProposal::Expand { add: 3, broker_epoch: -1 }]
    );
    manager.follower_fetched(&p, 3, 2, 42_500);
    assert!(sink.0.lock().unwrap().is_empty(), "proposed once while the controller decides");

    // The controller turns it down (the follower was still fenced, say): the next fetch
    // proposes it again.
    manager.isr_change_not_committed(&changes[0], NotCommitted::NotAttempted);
    manager.follower_fetched(&p, 3, 2, 43_000);
    let proposed: Vec<IsrProposal> = sink.0.lock().unwrap().drain(..).map(|c| c.proposal).collect();
    assert_eq!(proposed, vec![IsrProposal::Expand { add: 3, broker_epoch: -1 }]);

    // What the metadata committed is what the leader counts (for /metrics): the shrink,
    // then, once committed, the expand; proposals alone count nothing.
    let counters = manager.leadership_counters();
    assert_eq!((counters.isr_shrinks(), counters.isr_expands()), (1, 0));
    let mut expanded = shrunk.clone();
    expanded.apply(&MetadataRecord::Partition {
        topic_id: TOPIC_ID,
        partition: 0,
        replicas: vec![1, 2, 3],
        isr: vec![1, 2, 3],
        leader: 1,
        leader_epoch: 0,
        partition_epoch: 2,
        adding_replicas: vec![],
        removing_replicas: vec![],
        eligible_leader_replicas: Vec::new(),
        last_known_elr: Vec::new(),
    });
    manager.apply_image(&expanded, 43_000).unwrap();
    assert_eq!((counters.isr_shrinks(), counters.isr_expands(), counters.unclean_elections()), (1, 1, 0));
}

/// Kafka's maximal ISR (KIP-497): from the moment a follower is proposed for the ISR
/// until the answer, the high watermark waits for it too, since the controller may
/// commit it (and could then elect it) before this leader hears. Without that, records
/// acknowledged to acks=all meanwhile could be missing from an ISR member.
#[test]
fn a_follower_proposed_for_the_isr_holds_the_high_watermark_until_the_answer() {
    use std::sync::atomic::{AtomicI64, Ordering};

    use super::isr::IsrProposal;

    let dir = tempfile::tempdir().unwrap();
    let mut broker = BrokerConfig::build(&[]).unwrap();
    broker.data_dir = dir.path().to_owned();
    let now = Arc::new(AtomicI64::new(1_000));
    let clock = now.clone();
    let manager = ReplicaManager::new(&broker, Arc::new(move || clock.load(Ordering::SeqCst))).unwrap();
    let sink = Arc::new(Proposals::default());
    manager.set_isr_sink(sink.clone());
    let partition_in = |epoch: i32, isr: &[i32]| {
        let mut img = image(&[1, 2, 3], 1, 0);
        img.apply(&MetadataRecord::Partition {
            topic_id: TOPIC_ID,
            partition: 0,
            replicas: vec![1, 2, 3],
            isr: isr.to_vec(),
            leader: 1,
            leader_epoch: 0,
            partition_epoch: epoch,
            adding_replicas: vec![],
            removing_replicas: vec![],
            eligible_leader_replicas: Vec::new(),
            last_known_elr: Vec::new(),
        });
        img
    };
    manager.apply_image(&partition_in(1, &[1, 2]), 1_000).unwrap();
    let p = manager.partition(&TOPIC_ID, 0).unwrap();
    let append = |tag: &str| {
        let mut records =
            super::ValidatedRecords::validate(batch(tag, 2, 1_000), &p.config().produce_limits(1_000)).unwrap();
        manager.append_validated(&p, &mut records, 1_000).unwrap();
    };
    let proposed = || sink.0.lock().unwrap().drain(..).collect::<Vec<super::IsrChange>>();
    append("a");
    manager.follower_fetched(&p, 2, 2, 1_100);
    assert_eq!(p.high_watermark(), 2);

    // Follower 3 reaches the high watermark: proposed, against partition epoch 1.
    manager.follower_fetched(&p, 3, 2, 1_200);
    let changes = proposed();
    assert_eq!(changes.len(), 1);
    assert_eq!(
        (&changes[0].proposal, changes[0].partition_epoch),
        (&IsrProposal::Expand { add: 3, broker_epoch: -1 }, 1)
    );
    append("b");
    manager.follower_fetched(&p, 2, 4, 1_300);
    assert_eq!(p.high_watermark(), 2, "offsets 2 and 3 wait for follower 3 too");

    // No answer (no controller leader, a lost reply): it may yet commit, so it is sent
    // again, and the high watermark keeps waiting.
    manager.isr_change_not_committed(&changes[0], NotCommitted::NoAnswer);
    assert_eq!(proposed(), changes);
    assert_eq!(p.high_watermark(), 2);
    // Refused as stale (a newer leader or partition epoch): kept, not sent, waiting for
    // the metadata that says so.
    manager.isr_change_not_committed(&changes[0], NotCommitted::Stale);
    assert!(proposed().is_empty());
    assert_eq!(p.high_watermark(), 2);
    // One proposal at a time: a lagging follower 2 is not proposed out meanwhile.
    manager.check_isr_lag(1_000_000);
    assert!(proposed().is_empty());

    // Not attempted (follower 3 was fenced, say): nothing waits for it any more, and the
    // same process of 3 is proposed again only after a while.
    now.store(1_350, Ordering::SeqCst);
    manager.isr_change_not_committed(&changes[0], NotCommitted::NotAttempted);
    assert_eq!(p.high_watermark(), 4);
    assert!(proposed().is_empty());
    manager.follower_fetched(&p, 3, 4, 1_400);
    assert!(proposed().is_empty());
    manager.follower_fetched(&p, 3, 4, 1_350 + super::isr::EXPANSION_RETRY_MS);
    let again = proposed();
    assert_eq!(
        again.iter().map(|c| &c.proposal).collect::<Vec<_>>(),
        vec![&IsrProposal::Expand { add: 3, broker_epoch: -1 }]
    );

    // Committed: the new partition epoch answers it; an answer to the old one that
    // arrives afterwards changes nothing and sends nothing.
    manager.apply_image(&partition_in(2, &[1, 2, 3]), 2_000).unwrap();
    manager.isr_change_not_committed(&again[0], NotCommitted::NoAnswer);
    manager.isr_change_not_committed(&again[0], NotCommitted::NotAttempted);
    assert!(proposed().is_empty());
    append("c");
    manager.follower_fetched(&p, 2, 6, 2_100);
    assert_eq!(p.high_watermark(), 4, "3 is in the ISR");
    manager.follower_fetched(&p, 3, 6, 2_200);
    assert_eq!(p.high_watermark(), 6);
}

/// Broker 2 alone, its fetchers not started: the follower side of the endpoint tests.
fn broker_2(dir: &Path) -> Arc<ReplicaManager> {
    let mut broker = BrokerConfig::build(&[]).unwrap();
    broker.node_id = 2;
    broker.data_dir = dir.to_path_buf();
    Arc::new(ReplicaManager::new(&broker, system_clock()).unwrap())
}

/// One more topic in `image`: a single partition on brokers 1 and 2, led by 1.
fn add_topic_led_by_1(image: &mut MetadataImage, name: &str, topic_id: Uuid) {
    image.apply(&MetadataRecord::Topic { name: name.into(), topic_id });
    image.apply(&MetadataRecord::Partition {
        topic_id,
        partition: 0,
        replicas: vec![1, 2],
        isr: vec![1, 2],
        leader: 1,
        leader_epoch: 0,
        partition_epoch: 0,
        adding_replicas: vec![],
        removing_replicas: vec![],
        eligible_leader_replicas: Vec::new(),
        last_known_elr: Vec::new(),
    });
}

/// An endpoint that records what each fetch asks for and never answers (a leader with
/// nothing to send, long-polling), so only a fetcher that gives up its fetch asks again.
#[derive(Default, Clone)]
struct Silent {
    /// The (topic id, partition) pairs of each fetch, in order.
    asked: Arc<Mutex<Vec<AskedFor>>>,
}

type AskedFor = Vec<(Uuid, i32)>;

impl LeaderEndpoints for Silent {
    fn endpoint(&self, _leader: i32) -> Arc<dyn LeaderEndpoint> {
        Arc::new(self.clone())
    }
}

impl LeaderEndpoint for Silent {
    fn fetch(&self, request: ReplicaFetchRequest) -> EndpointFuture<'_, Result<Vec<FetchedPartition>, EndpointError>> {
        self.asked.lock().unwrap().push(request.partitions.iter().map(|p| (p.topic_id, p.partition)).collect());
        Box::pin(std::future::pending())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_gained_on_a_leader_is_fetched_without_waiting_for_the_fetch_in_flight() {
    // Broker 2 follows partition 0 on leader 1, and its fetch is waiting there. Then it
    // becomes a follower of a second partition on the same leader (as after a failover):
    // it asks for both at once, not when the leader answers the fetch in flight.
    let dir = tempfile::tempdir().unwrap();
    let manager = broker_2(dir.path());
    let mut img = image(&[1, 2], 1, 0);
    manager.apply_image(&img, manager.now_ms()).unwrap();
    let endpoint = Silent::default();
    let fetchers = FetcherManager::start(manager.clone(), Arc::new(endpoint.clone()));
    eventually("the first fetch is in flight", || !endpoint.asked.lock().unwrap().is_empty()).await;
    assert_eq!(endpoint.asked.lock().unwrap()[0], vec![(TOPIC_ID, 0)]);

    let other = Uuid::from_u128(0x8);
    add_topic_led_by_1(&mut img, "u", other);
    manager.apply_image(&img, manager.now_ms()).unwrap();
    eventually("a fetch asks for the gained partition", || {
        endpoint.asked.lock().unwrap().iter().any(|asked| asked.contains(&(other, 0)) && asked.contains(&(TOPIC_ID, 0)))
    })
    .await;
    fetchers.shutdown().await;
}

/// An endpoint whose first fetch answers partition `behind` with UNKNOWN_LEADER_EPOCH
/// (the leader has not applied the failover yet) and every other partition with no
/// records; every later fetch waits forever, as a long poll with nothing to send.
#[derive(Clone)]
struct BehindOnce {
    behind: (Uuid, i32),
    asked: Arc<Mutex<Vec<AskedFor>>>,
}

impl LeaderEndpoints for BehindOnce {
    fn endpoint(&self, _leader: i32) -> Arc<dyn LeaderEndpoint> {
        Arc::new(self.clone())
    }
}

impl LeaderEndpoint for BehindOnce {
    fn fetch(&self, request: ReplicaFetchRequest) -> EndpointFuture<'_, Result<Vec<FetchedPartition>, EndpointError>> {
        let first = {
            let mut asked = self.asked.lock().unwrap();
            asked.push(request.partitions.iter().map(|p| (p.topic_id, p.partition)).collect());
            asked.len() == 1
        };
        Box::pin(async move {
            if !first {
                return std::future::pending().await;
            }
            let answer = |p: &super::replica_fetch::PartitionFetch| FetchedPartition {
                topic_id: p.topic_id,
                partition: p.partition,
                result: if (p.topic_id, p.partition) == self.behind {
                    Err(ReplicaFetchError::UnknownLeaderEpoch)
                } else {
                    Ok(FetchedData {
                        records: bytes::Bytes::new(),
                        high_watermark: 0,
                        log_start_offset: 0,
                        diverging_epoch: None,
                    })
                },
            };
            Ok(request.partitions.iter().map(answer).collect())
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_whose_leader_is_behind_is_retried_without_waiting_for_the_fetch_in_flight() {
    // Broker 2 follows two partitions on leader 1; the leader answers one of them with
    // UNKNOWN_LEADER_EPOCH, then long-polls on the other. The lagging partition is asked
    // for again soon, in a new fetch, not after the long poll (which here never ends).
    let dir = tempfile::tempdir().unwrap();
    let manager = broker_2(dir.path());
    let mut img = image(&[1, 2], 1, 0);
    let other = Uuid::from_u128(0x8);
    add_topic_led_by_1(&mut img, "u", other);
    manager.apply_image(&img, manager.now_ms()).unwrap();
    let endpoint = BehindOnce { behind: (other, 0), asked: Arc::default() };
    let fetchers = FetcherManager::start(manager.clone(), Arc::new(endpoint.clone()));
    eventually("the lagging partition is asked for again", || {
        let asked = endpoint.asked.lock().unwrap();
        asked.len() >= 2 && asked[1..].iter().any(|a| a.contains(&(other, 0)))
    })
    .await;
    fetchers.shutdown().await;
}

mod throttle;
