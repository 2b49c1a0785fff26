//! Three in-process controllers on loopback form a Raft quorum: operations through any
//! node reach every image, a stopped leader is replaced, a restarted node catches up
//! (from the log, or from a snapshot once the log behind it is compacted).
//!
//! Controllers are opened on a runtime of the test's own; their synchronous calls are
//! made from the test thread, as handlers make them from blocking threads. Waiting is
//! polling with a deadline; timings are printed, never asserted.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use runnel::controller::{
    Controller, ControllerConfig, ControllerError, Leadership, NewTopic, QuorumReplica, RaftTuning,
};
use tempfile::TempDir;
use tokio::runtime::Runtime;

const DEADLINE: Duration = Duration::from_secs(20);

struct Cluster {
    rt: Runtime,
    dirs: Vec<TempDir>,
    addrs: Vec<SocketAddr>,
    nodes: Vec<Option<Controller>>,
    tuning: RaftTuning,
    leader_rebalance_interval: Option<Duration>,
    /// Each node's data dir id (`meta.properties`); `None` here unless a test names them.
    directory_ids: Vec<Option<uuid::Uuid>>,
}

impl Cluster {
    fn start(tuning: RaftTuning) -> Cluster {
        Cluster::start_with(tuning, None)
    }

    fn start_with(tuning: RaftTuning, leader_rebalance_interval: Option<Duration>) -> Cluster {
        Cluster::start_full(tuning, leader_rebalance_interval, vec![None; 3])
    }

    fn start_full(
        tuning: RaftTuning,
        leader_rebalance_interval: Option<Duration>,
        directory_ids: Vec<Option<uuid::Uuid>>,
    ) -> Cluster {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let listeners: Vec<tokio::net::TcpListener> =
            (0..3).map(|_| rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap()).collect();
        let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
        let dirs: Vec<TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let nodes = vec![None, None, None];
        let mut cluster = Cluster { rt, dirs, addrs, nodes, tuning, leader_rebalance_interval, directory_ids };
        let opened: Vec<Controller> = cluster.rt.block_on(async {
            let futures = listeners.into_iter().enumerate().map(|(i, l)| {
                let config = cluster.config(i);
                let dir = cluster.dirs[i].path().to_owned();
                async move { Controller::open(&dir, config, Some(l)).await.unwrap() }
            });
            let mut out = Vec::new();
            for f in futures.collect::<Vec<_>>() {
                out.push(tokio::spawn(f));
            }
            let mut opened = Vec::new();
            for h in out {
                opened.push(h.await.unwrap());
            }
            opened
        });
        for (i, c) in opened.into_iter().enumerate() {
            cluster.nodes[i] = Some(c);
        }
        cluster
    }

    fn config(&self, i: usize) -> ControllerConfig {
        ControllerConfig {
            node_id: i as i32 + 1,
            advertised: ("127.0.0.1".into(), 19092 + i as u16),
            inter_broker_advertised: None,
            rack: None,
            cluster_id: None,
            default_partitions: 1,
            default_replication_factor: 1,
            voters: self.addrs.iter().enumerate().map(|(j, a)| (j as i32 + 1, a.to_string())).collect(),
            controller_addr: None,
            directory_id: self.directory_ids[i],
            tuning: self.tuning.clone(),
            leader_rebalance_interval: self.leader_rebalance_interval,
        }
    }

    fn node(&self, id: i32) -> &Controller {
        self.nodes[id as usize - 1].as_ref().expect("node is running")
    }

    fn running(&self) -> impl Iterator<Item = &Controller> {
        self.nodes.iter().flatten()
    }

    /// The leader every running node agrees on.
    fn agreed_leader(&self) -> Option<i32> {
        let leaders: Vec<Option<i32>> = self.running().map(Controller::leader).collect();
        let first = leaders.first().copied().flatten()?;
        leaders.iter().all(|l| *l == Some(first)).then_some(first)
    }

    fn stop(&mut self, id: i32) {
        let c = self.nodes[id as usize - 1].take().expect("node is running");
        self.rt.block_on(c.shutdown());
        drop(c);
    }

    fn restart(&mut self, id: i32) {
        let i = id as usize - 1;
        let config = self.config(i);
        let (dir, addr) = (self.dirs[i].path().to_owned(), self.addrs[i]);
        let c = self.rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
            Controller::open(&dir, config, Some(listener)).await.unwrap()
        });
        self.nodes[i] = Some(c);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in self.nodes.iter_mut().filter_map(Option::take) {
            self.rt.block_on(c.shutdown());
        }
    }
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !cond() {
        assert!(started.elapsed() < DEADLINE, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
    started.elapsed()
}

/// `watcher`'s view of the leadership once the leader's replication stream to it is up
/// and the view has stayed the same for a while (while the quorum forms a stream can
/// be opened more than once, and each one would end a wait).
fn settled_leadership(cluster: &Cluster, watcher: i32) -> Leadership {
    wait_until("the leader has connected to the watcher", || cluster.node(watcher).leadership().contacts > 0);
    let mut seen = cluster.node(watcher).leadership();
    wait_until("the watcher's view of the leadership settles", || {
        std::thread::sleep(Duration::from_millis(500));
        let now = cluster.node(watcher).leadership();
        std::mem::replace(&mut seen, now) == now
    });
    eprintln!("node {watcher} settled at {seen:?}");
    seen
}

fn topic(name: &str, partitions: i32, replication_factor: i16) -> NewTopic {
    NewTopic { name: name.into(), num_partitions: partitions, replication_factor, assignments: vec![], configs: vec![] }
}

/// Once the nodes agree on a leader and every broker is registered (they register
/// fenced): two heartbeats of one incarnation let each in (what a Broker's heartbeat
/// loop does).
fn admit_all(cluster: &Cluster) {
    wait_until("the nodes agree on a leader", || cluster.agreed_leader().is_some());
    wait_until("every broker is registered on every node", || cluster.running().all(|c| c.image().brokers.len() == 3));
    for (i, c) in cluster.nodes.iter().enumerate() {
        if let Some(c) = c {
            let incarnation = first_incarnation(i as i32 + 1);
            cluster.rt.block_on(c.heartbeat(incarnation, false, Vec::new())).unwrap();
            cluster.rt.block_on(c.heartbeat(incarnation, false, Vec::new())).unwrap();
        }
    }
    wait_until("every broker is unfenced on every node", || {
        cluster.running().all(|c| c.image().brokers.values().filter(|b| !b.fenced).count() == 3)
    });
}

/// The broker process id [`admit_all`] heartbeats node `id` with.
fn first_incarnation(id: i32) -> uuid::Uuid {
    uuid::Uuid::from_u128(id as u128)
}

fn has_topic(c: &Controller, name: &str) -> bool {
    c.image().topic(name).is_some()
}

#[test]
fn a_quorum_of_three_replicates_fails_over_and_catches_up() {
    let mut cluster = Cluster::start(RaftTuning::default());
    let elected = wait_until("the nodes agree on a leader", || cluster.agreed_leader().is_some());
    eprintln!("first leader agreed after {elected:?}");
    admit_all(&cluster);
    let leader = cluster.agreed_leader().unwrap();
    let follower = (1..=3).find(|&id| id != leader).unwrap();

    // A malformed frame on the controller listener closes that connection only.
    let garbage_to = cluster.addrs[leader as usize - 1];
    cluster.rt.block_on(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(garbage_to).await.unwrap();
        s.write_all(&[0xff; 16]).await.unwrap();
        let mut buf = [0u8; 16];
        let n = tokio::time::timeout(DEADLINE, s.read(&mut buf)).await.expect("closed, not hung").unwrap_or(0);
        assert_eq!(n, 0, "no answer to a malformed frame");
    });

    // Through a follower: forwarded to the leader, and visible on the follower at once.
    let created = cluster.rt.block_on(cluster.node(follower).create_topic(&topic("orders", 3, 3), false)).unwrap();
    assert!(has_topic(cluster.node(follower), "orders"), "the node that took the request sees it at once");
    for p in &created.partitions {
        assert_eq!(p.replicas.len(), 3);
        assert_eq!(p.leader, p.replicas[0]);
        assert_eq!(p.isr, p.replicas);
    }
    let leaders: std::collections::BTreeSet<i32> = created.partitions.iter().map(|p| p.leader).collect();
    assert_eq!(leaders.len(), 3, "leaders spread over the brokers: {:?}", created.partitions);
    wait_until("every image has the topic", || cluster.running().all(|c| has_topic(c, "orders")));
    // Validation happens on the leader, for forwarded operations too.
    let again = cluster.rt.block_on(cluster.node(follower).create_topic(&topic("orders", 1, 1), false));
    assert!(matches!(again, Err(runnel::controller::ControllerError::TopicAlreadyExists(_))), "{again:?}");
    let id1 = cluster.rt.block_on(cluster.node(follower).allocate_producer_id()).unwrap();
    let id2 = cluster.rt.block_on(cluster.node(leader).allocate_producer_id()).unwrap();
    assert_ne!(id1 / 1000, id2 / 1000, "each node takes its own block of producer ids");

    // Stop the leader: the others elect a new one.
    cluster.stop(leader);
    let failover =
        wait_until("the survivors agree on a new leader", || cluster.agreed_leader().is_some_and(|l| l != leader));
    eprintln!("failover: new leader agreed {failover:?} after the old one stopped");
    let survivor = (1..=3).find(|&id| id != leader && Some(id) != cluster.agreed_leader()).unwrap();
    cluster.rt.block_on(cluster.node(survivor).create_topic(&topic("after-failover", 1, 2), false)).unwrap();
    assert!(has_topic(cluster.node(survivor), "after-failover"));

    // The stopped node comes back and catches up.
    cluster.restart(leader);
    wait_until("the restarted node caught up", || has_topic(cluster.node(leader), "after-failover"));
    assert!(has_topic(cluster.node(leader), "orders"));
}

/// What a broker's heartbeat loop waits on besides its timer: a new quorum leader (a
/// new term, or a new node) wakes it, so the broker heartbeats that leader at once.
#[test]
fn a_new_quorum_leader_wakes_whoever_waits_for_one() {
    let mut cluster = Cluster::start(RaftTuning::default());
    wait_until("the nodes agree on a leader", || cluster.agreed_leader().is_some());
    let leader = cluster.agreed_leader().unwrap();
    let watcher = (1..=3).find(|&id| id != leader).unwrap();
    let seen = settled_leadership(&cluster, watcher);
    assert_eq!(seen.leader, Some(leader));

    // Nothing changed: the wait does not end by itself.
    let c = cluster.node(watcher);
    let idle = cluster
        .rt
        .block_on(async { tokio::time::timeout(Duration::from_millis(500), c.leadership_changed(seen)).await });
    assert!(idle.is_err(), "woke with the same leader and term");

    // The leader stops while the watcher waits: the wait ends once the survivors have
    // elected another.
    let stopping = cluster.nodes[leader as usize - 1].take().expect("the leader is running");
    let woke = std::thread::scope(|s| {
        let waiting = s.spawn(|| {
            let c = cluster.node(watcher);
            cluster.rt.block_on(async { tokio::time::timeout(DEADLINE, c.leadership_changed(seen)).await })
        });
        std::thread::sleep(Duration::from_millis(100));
        cluster.rt.block_on(stopping.shutdown());
        waiting.join().unwrap()
    });
    assert!(woke.is_ok(), "not woken by the new leader within {DEADLINE:?}");
    let now = cluster.node(watcher).leadership();
    assert!(now.leader.is_some_and(|l| l != leader) && now.term > seen.term, "{seen:?} then {now:?}");
}

/// A leader that hangs (SIGSTOP, a stall) still accepts connections on its controller
/// listener and answers nothing. An operation a follower forwards to it goes to the new
/// leader once the others have elected one, not after the operation's whole timeout.
/// Broker heartbeats are such operations: held until that timeout (15 s), every broker
/// missed the new leader's first session (9 s from its election), and it fenced them all
/// (seen in a fault run: a 12 s SIGSTOP of the leader left every partition leaderless).
/// Elections are slow here, so the forward surely goes to the hung leader first.
#[test]
fn a_forward_to_a_leader_that_hangs_goes_to_the_new_leader() {
    let tuning = RaftTuning { election_timeout_min_ms: 2_000, election_timeout_max_ms: 3_000, ..RaftTuning::default() };
    let mut cluster = Cluster::start(tuning);
    admit_all(&cluster);
    let leader = cluster.agreed_leader().unwrap();
    let follower = (1..=3).find(|&id| id != leader).unwrap();

    // In the leader's place, a listener that accepts connections and never answers.
    let addr = cluster.addrs[leader as usize - 1];
    cluster.stop(leader);
    let hung = cluster.rt.block_on(tokio::net::TcpListener::bind(addr)).unwrap();
    let holding = cluster.rt.spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = hung.accept().await {
            held.push(conn);
        }
    });
    let before = cluster.node(follower).leader();
    let started = Instant::now();
    let created = cluster.rt.block_on(cluster.node(follower).create_topic(&topic("past-a-hung-leader", 1, 1), false));
    eprintln!(
        "forwarded while node {follower} saw leader {before:?}: {:?} after {:?}",
        created.is_ok(),
        started.elapsed()
    );
    assert!(created.is_ok(), "{created:?}");
    assert!(cluster.node(follower).leader().is_some_and(|l| l != leader));
    holding.abort();
}

/// A leader restarted before the others' election timeout resumes its term (openraft
/// restores a committed leadership at startup): term and leader stay what the watcher
/// saw, but the leader connects to it anew, and that ends the wait too. Elections are
/// slow here so that nobody else is elected meanwhile.
#[test]
fn a_restarted_leader_that_resumes_its_term_wakes_whoever_waits() {
    let tuning = RaftTuning { election_timeout_min_ms: 5_000, election_timeout_max_ms: 6_000, ..RaftTuning::default() };
    let mut cluster = Cluster::start(tuning);
    wait_until("the nodes agree on a leader", || cluster.agreed_leader().is_some());
    let leader = cluster.agreed_leader().unwrap();
    let watcher = (1..=3).find(|&id| id != leader).unwrap();
    admit_all(&cluster);
    let seen = settled_leadership(&cluster, watcher);

    // The leader's replication stream stays, and the leadership check before each
    // operation (one request on a connection of its own) is no contact: the wait does
    // not end by itself, nor while operations are committed.
    let idle = std::thread::scope(|s| {
        let waiting = s.spawn(|| {
            let c = cluster.node(watcher);
            cluster
                .rt
                .block_on(async { tokio::time::timeout(Duration::from_millis(1500), c.leadership_changed(seen)).await })
        });
        for i in 0..3 {
            cluster.rt.block_on(cluster.node(leader).create_topic(&topic(&format!("idle{i}"), 1, 1), false)).unwrap();
            cluster
                .rt
                .block_on(cluster.node(watcher).create_topic(&topic(&format!("forwarded{i}"), 1, 1), false))
                .unwrap();
        }
        waiting.join().unwrap()
    });
    assert!(idle.is_err(), "woke with the same leader, term and replication stream");

    cluster.stop(leader);
    cluster.restart(leader);
    let started = Instant::now();
    let c = cluster.node(watcher);
    let woke = cluster.rt.block_on(async { tokio::time::timeout(DEADLINE, c.leadership_changed(seen)).await });
    assert!(woke.is_ok(), "not woken by the restarted leader within {DEADLINE:?}");
    eprintln!("woken {:?} after the restart", started.elapsed());
    let now = cluster.node(watcher).leadership();
    assert_eq!((now.term, now.leader), (seen.term, seen.leader), "the restarted leader resumed its term");
    assert!(now.contacts > seen.contacts, "{seen:?} then {now:?}");
}

#[test]
fn a_lagging_node_installs_a_snapshot_after_log_compaction() {
    let tuning = RaftTuning { snapshot_every_entries: 5, keep_entries_after_snapshot: 0, ..RaftTuning::default() };
    let mut cluster = Cluster::start(tuning);
    admit_all(&cluster);
    let leader = cluster.agreed_leader().unwrap();
    let lagging = (1..=3).find(|&id| id != leader).unwrap();
    cluster.stop(lagging);
    for i in 0..20 {
        cluster.rt.block_on(cluster.node(leader).create_topic(&topic(&format!("t{i}"), 1, 1), false)).unwrap();
    }
    let metrics = cluster.node(leader).raft_metrics();
    let purged = metrics.purged.map(|p| p.index).unwrap_or(0);
    assert!(metrics.snapshot.is_some(), "the leader took a snapshot: {metrics:?}");
    wait_until("the leader compacted its log", || {
        cluster.node(leader).raft_metrics().purged.is_some_and(|p| p.index > 5)
    });
    eprintln!("leader purged up to {purged}");
    cluster.restart(lagging);
    wait_until("the lagging node has every topic", || {
        (0..20).all(|i| has_topic(cluster.node(lagging), &format!("t{i}")))
    });
    let m = cluster.node(lagging).raft_metrics();
    assert!(m.snapshot.is_some(), "the lagging node installed a snapshot: {m:?}");
    // Its state survives its own restart too (snapshot on disk + log after it).
    cluster.stop(lagging);
    cluster.restart(lagging);
    assert!((0..20).all(|i| has_topic(cluster.node(lagging), &format!("t{i}"))));
}

/// A broker-only node (not a voter) joins as a Raft learner: it follows the committed
/// metadata, registers itself, and its changes are forwarded to the leader.
#[test]
fn a_broker_only_node_follows_the_log_and_forwards_changes() {
    let cluster = Cluster::start(RaftTuning::default());
    admit_all(&cluster);
    cluster.rt.block_on(cluster.node(1).create_topic(&topic("before-join", 1, 1), false)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut config = cluster.config(0);
    config.node_id = 4;
    let observer = cluster.rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        Controller::open(dir.path(), config, Some(listener)).await.unwrap()
    });
    wait_until("the observer follows the log", || has_topic(&observer, "before-join"));
    wait_until("every node lists four brokers", || {
        observer.image().brokers.len() == 4 && cluster.running().all(|c| c.image().brokers.len() == 4)
    });
    cluster.rt.block_on(observer.create_topic(&topic("from-observer", 2, 3), false)).unwrap();
    assert!(has_topic(&observer, "from-observer"), "visible at once on the node that took it");
    wait_until("the voters have it", || cluster.running().all(|c| has_topic(c, "from-observer")));
    let m = cluster.node(cluster.agreed_leader().unwrap()).raft_metrics();
    let membership = m.membership_config.membership();
    assert!(membership.get_node(&4).is_some() && !membership.voter_ids().any(|v| v == 4), "{membership:?}");
    cluster.rt.block_on(observer.shutdown());
}

/// The voters the quorum leader's membership names.
fn voters(cluster: &Cluster) -> Vec<u64> {
    let leader = cluster.agreed_leader().expect("an agreed leader");
    cluster.node(leader).raft_metrics().membership_config.membership().voter_ids().collect()
}

/// The directory id that `c`'s view of the membership names member `id` with.
fn named(c: &Controller, id: u64) -> Option<uuid::Uuid> {
    c.raft_metrics().membership_config.membership().get_node(&id).and_then(|n| n.directory_id)
}

/// KIP-853: a learner that caught up becomes a voter (AddRaftVoter) and a voter becomes a
/// learner (RemoveRaftVoter), each refused as Kafka's leader refuses it when it does not
/// apply. Then the changed set decides: with voters {1, 2, 4}, stopping 1 and 3 leaves two
/// of three, which still commit (of the first voters {1, 2, 3} only one would be left).
#[test]
fn voters_are_added_and_removed_and_the_new_set_decides() {
    let mut cluster = Cluster::start(RaftTuning::default());
    admit_all(&cluster);
    let dir = tempfile::tempdir().unwrap();
    let directory = uuid::Uuid::from_u128(0x4444);
    let mut config = cluster.config(0);
    config.node_id = 4;
    config.directory_id = Some(directory);
    let learner = cluster.rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        Controller::open(dir.path(), config, Some(listener)).await.unwrap()
    });
    wait_until("the learner is registered", || learner.image().brokers.len() == 4);
    let via = |c: &Controller, op: &str, id: i32, d: uuid::Uuid| {
        let (c, op) = (c, op.to_owned());
        cluster.rt.block_on(async move {
            if op == "add" {
                c.add_raft_voter(id, d).await
            } else {
                c.remove_raft_voter(id, d).await
            }
        })
    };
    let n2 = cluster.node(2);
    let refused = via(n2, "add", 1, uuid::Uuid::nil());
    assert!(matches!(refused, Err(ControllerError::DuplicateVoter(_))), "{refused:?}");
    let refused = via(n2, "add", 7, uuid::Uuid::nil());
    assert!(matches!(&refused, Err(ControllerError::NotController(m)) if m.contains("does not follow")), "{refused:?}");
    let refused = via(n2, "add", 4, uuid::Uuid::from_u128(5));
    assert!(matches!(&refused, Err(ControllerError::NotController(m)) if m.contains("directory")), "{refused:?}");
    assert_eq!(voters(&cluster), [1, 2, 3]);

    via(n2, "add", 4, directory).unwrap();
    wait_until("every voter sees four voters", || voters(&cluster) == [1, 2, 3, 4]);

    // A static voter has no directory id: it is named with the nil uuid.
    let refused = via(&learner, "remove", 3, uuid::Uuid::from_u128(9));
    assert!(matches!(refused, Err(ControllerError::VoterNotFound(_))), "{refused:?}");
    let refused = via(&learner, "remove", 9, uuid::Uuid::nil());
    assert!(matches!(refused, Err(ControllerError::VoterNotFound(_))), "{refused:?}");
    via(&learner, "remove", 3, uuid::Uuid::nil()).unwrap();
    wait_until("the voters are 1, 2 and 4", || voters(&cluster) == [1, 2, 4]);
    let quorum = cluster.rt.block_on(n2.describe_quorum()).unwrap();
    let ids = |rs: &[QuorumReplica]| rs.iter().map(|r| r.replica_id).collect::<Vec<_>>();
    assert_eq!((ids(&quorum.voters), ids(&quorum.observers)), (vec![1, 2, 4], vec![3]));
    assert_eq!(quorum.voters[2].directory_id, Some(directory));
    assert_eq!(quorum.endpoints.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [1, 2, 4]);

    cluster.stop(1);
    cluster.stop(3);
    cluster.rt.block_on(learner.create_topic(&topic("after-the-change", 1, 1), false)).unwrap();
    wait_until("node 2 has it", || has_topic(cluster.node(2), "after-the-change"));
    cluster.rt.block_on(learner.shutdown());
}

/// KIP-853: a voter whose metadata log was lost (its node back with a new data dir, so
/// a new directory id and an empty log) neither votes nor stands for election. With
/// voters {1, 2, 4} and node 4 wiped, stopping the leader leaves one voter and node 4:
/// no leader, so nothing commits (without the directory check node 4 would vote, and
/// the create below would succeed). Removing voter 4 under its old directory id lets the
/// node rejoin as a learner under its new one, and adding it back makes the pair decide.
#[test]
fn a_voter_whose_log_was_lost_does_not_vote_until_it_is_removed_and_added_back() {
    let mut cluster = Cluster::start(RaftTuning::default());
    admit_all(&cluster);
    let (old_dir, new_dir) = (uuid::Uuid::from_u128(0x41), uuid::Uuid::from_u128(0x42));
    let open_4 = |cluster: &Cluster, data: &std::path::Path, directory: uuid::Uuid, at: &str| {
        let mut config = cluster.config(0);
        config.node_id = 4;
        config.directory_id = Some(directory);
        let (data, at) = (data.to_owned(), at.to_owned());
        cluster.rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind(at).await.unwrap();
            Controller::open(&data, config, Some(listener)).await.unwrap()
        })
    };
    let first_data = tempfile::tempdir().unwrap();
    let node_4 = open_4(&cluster, first_data.path(), old_dir, "127.0.0.1:0");
    let addr_4 = node_4.controller_addr().unwrap().to_string();
    wait_until("node 4 is registered", || node_4.image().brokers.len() == 4);
    let n1 = cluster.node(1);
    cluster.rt.block_on(n1.add_raft_voter(4, old_dir)).unwrap();
    cluster.rt.block_on(n1.remove_raft_voter(3, uuid::Uuid::nil())).unwrap();
    // A node that has not reported its directory (node 3 runs without one here) is not
    // added back: a wrong id would make a voter that refuses every vote.
    let refused = cluster.rt.block_on(n1.add_raft_voter(3, uuid::Uuid::from_u128(0x33)));
    assert!(matches!(&refused, Err(ControllerError::NotController(m)) if m.contains("not reported")), "{refused:?}");
    cluster.stop(3);
    wait_until("the voters are 1, 2 and 4", || voters(&cluster) == [1, 2, 4]);

    // Node 4 loses its disk and comes back at the same address.
    cluster.rt.block_on(node_4.shutdown());
    drop(node_4);
    drop(first_data);
    let second_data = tempfile::tempdir().unwrap();
    let node_4 = open_4(&cluster, second_data.path(), new_dir, &addr_4);
    wait_until("node 4 caught up", || node_4.image().brokers.len() == 4);
    let leader = cluster.agreed_leader().unwrap();
    let other = 3 - leader;
    cluster.stop(leader);
    let refused = cluster.rt.block_on(node_4.create_topic(&topic("no-quorum", 1, 1), false));
    assert!(refused.is_err(), "one voter and a node without its log elected a leader: {refused:?}");
    assert!(!has_topic(cluster.node(other), "no-quorum"));
    assert_ne!(node_4.leader(), Some(4));

    // The operator's way out: remove the old voter 4, add the new one.
    cluster.restart(leader);
    wait_until("1 and 2 agree on a leader", || cluster.agreed_leader().is_some());
    cluster.rt.block_on(node_4.remove_raft_voter(4, old_dir)).unwrap();
    wait_until("node 4 is a learner under its new directory", || {
        named(cluster.node(1), 4) == Some(new_dir) && voters(&cluster) == [1, 2]
    });
    cluster.rt.block_on(node_4.add_raft_voter(4, new_dir)).unwrap();
    wait_until("the voters are 1, 2 and 4 again", || voters(&cluster) == [1, 2, 4]);
    let stopped = match cluster.agreed_leader().unwrap() {
        4 => 1,
        leader => leader,
    };
    cluster.stop(stopped);
    cluster.rt.block_on(node_4.create_topic(&topic("with-the-new-4", 1, 1), false)).unwrap();
    wait_until("the other voter has it", || has_topic(cluster.node(3 - stopped), "with-the-new-4"));
    cluster.rt.block_on(node_4.shutdown());
}

/// Voters that `--controller-quorum-voters` named are named by their data dir's id once
/// they run (each sends it to the leader), so a wiped one is told apart as an added
/// voter is: node 2 back with a new data dir does not vote, and the other two need each
/// other. Removed and added back under its new directory, it votes again.
#[test]
fn voters_the_flags_named_are_named_by_their_directory_and_one_that_lost_its_log_does_not_vote() {
    let ids: Vec<Option<uuid::Uuid>> = (1..=3).map(|i| Some(uuid::Uuid::from_u128(0x10 + i))).collect();
    let mut cluster = Cluster::start_full(RaftTuning::default(), None, ids.clone());
    admit_all(&cluster);
    wait_until("every voter named by its directory on every node", || {
        cluster.running().all(|c| (1..=3).all(|id| named(c, id) == ids[id as usize - 1]))
    });

    let leader = cluster.agreed_leader().unwrap();
    let wiped = if leader == 2 { 3 } else { 2 };
    cluster.stop(wiped);
    let i = wiped as usize - 1;
    cluster.dirs[i] = tempfile::tempdir().unwrap();
    let new_dir = uuid::Uuid::from_u128(0x99);
    cluster.directory_ids[i] = Some(new_dir);
    cluster.restart(wiped);
    wait_until("the wiped node caught up", || cluster.node(wiped).image().brokers.len() == 3);
    assert_eq!(named(cluster.node(wiped), wiped as u64), ids[i], "a voter keeps the directory it was named with");
    cluster.stop(leader);
    let refused = cluster.rt.block_on(cluster.node(wiped).create_topic(&topic("no-quorum", 1, 1), false));
    assert!(refused.is_err(), "a voter and a node without its log elected a leader: {refused:?}");

    cluster.restart(leader);
    wait_until("a leader", || cluster.agreed_leader().is_some());
    let n = cluster.node(wiped);
    cluster.rt.block_on(n.remove_raft_voter(wiped, ids[i].unwrap())).unwrap();
    wait_until("the wiped node is a learner under its new directory", || {
        named(cluster.node(leader), wiped as u64) == Some(new_dir) && voters(&cluster).len() == 2
    });
    cluster.rt.block_on(n.add_raft_voter(wiped, new_dir)).unwrap();
    wait_until("three voters again", || voters(&cluster).len() == 3);
    let stopped = match cluster.agreed_leader().unwrap() {
        l if l == wiped => leader,
        l => l,
    };
    cluster.stop(stopped);
    cluster.rt.block_on(cluster.node(wiped).create_topic(&topic("with-the-new-disk", 1, 1), false)).unwrap();
}

/// After a controlled shutdown and a return, a broker leads nothing until the leader
/// rebalance moves the partitions whose preferred replica it is back to it (Kafka's
/// `auto.leader.rebalance.enable`).
#[test]
fn leadership_returns_to_the_preferred_replicas_by_itself() {
    let cluster = Cluster::start_with(RaftTuning::default(), Some(Duration::from_millis(200)));
    admit_all(&cluster);
    let created = cluster.rt.block_on(cluster.node(1).create_topic(&topic("spread", 3, 3), false)).unwrap();
    let preferred = |c: &Controller| -> Vec<bool> {
        c.image().topic("spread").unwrap().partitions.iter().map(|p| p.leader == p.replicas[0]).collect()
    };
    assert_eq!(preferred(cluster.node(1)), vec![true; 3]);

    // Broker 2 shuts down in a controlled way: it leads nothing and leaves the ISRs.
    cluster.rt.block_on(cluster.node(2).heartbeat(uuid::Uuid::new_v4(), true, Vec::new())).unwrap();
    let led_by_2 =
        |c: &Controller| c.image().topic("spread").unwrap().partitions.iter().filter(|p| p.leader == 2).count();
    wait_until("broker 2 leads nothing", || led_by_2(cluster.node(1)) == 0);
    // It comes back (a new incarnation) and its partitions' leaders let it into the ISR.
    let back = uuid::Uuid::new_v4();
    cluster.rt.block_on(cluster.node(2).heartbeat(back, false, Vec::new())).unwrap();
    cluster.rt.block_on(cluster.node(2).heartbeat(back, false, Vec::new())).unwrap();
    let add = Some((2, runnel::controller::broker_liveness::broker_epoch_of(back)));
    for p in &created.partitions {
        let now = cluster.node(1).image().topic("spread").unwrap().partitions[p.partition as usize].clone();
        if !now.isr.contains(&2) {
            let leader = cluster.node(now.leader);
            let epochs = (now.leader_epoch, now.partition_epoch);
            let incarnation = first_incarnation(now.leader);
            cluster
                .rt
                .block_on(leader.alter_partition(incarnation, (created.topic_id, p.partition), epochs, vec![], add))
                .unwrap();
        }
    }
    wait_until("leadership back on the preferred replicas", || {
        cluster.running().all(|c| preferred(c) == vec![true; 3] && led_by_2(c) == 1)
    });
}

/// A leader whose followers go away while it writes cannot commit: the operation in
/// flight is answered with an error once its time is up (REQUEST_TIMED_OUT to a client),
/// and so are the ones after it, which wait for the operation lock it holds. Before, a
/// write in flight when the quorum went away held that lock forever, and every later
/// operation (heartbeats, a controlled shutdown) waited behind it: a broker that could
/// not stop. Operations run back to back while the followers stop, so one is most
/// likely mid-commit then. The bound is the controller's own (seconds); the 120 s here
/// only tells a hang from an answer.
#[test]
fn a_leader_that_loses_its_quorum_mid_write_answers_in_bounded_time() {
    let mut cluster = Cluster::start(RaftTuning::default());
    admit_all(&cluster);
    let leader = cluster.agreed_leader().unwrap();
    let node = std::sync::Arc::new(cluster.nodes[leader as usize - 1].take().expect("the leader runs"));
    let (tx, rx) = std::sync::mpsc::channel();
    let (writer, rt) = (node.clone(), cluster.rt.handle().clone());
    std::thread::spawn(move || {
        // Until the first refusal, then one more operation, which waits for the lock.
        let mut created = 0;
        while rt.block_on(writer.create_topic(&topic(&format!("t-{created}"), 1, 1), false)).is_ok() {
            created += 1;
        }
        let after = rt.block_on(writer.heartbeat(uuid::Uuid::new_v4(), true, Vec::new())).is_ok();
        // The node goes back to the test only once this thread no longer holds it.
        drop(writer);
        let _ = tx.send((created, after));
    });
    wait_until("some topics are created", || node.image().topics.len() >= 3);
    for id in (1..=3).filter(|&id| id != leader) {
        cluster.stop(id);
    }
    let (created, after) = rx.recv_timeout(Duration::from_secs(120)).expect("answered, not hung");
    eprintln!("{created} topics created before the quorum went away");
    assert!(!after, "nothing commits without a quorum");
    let node = std::sync::Arc::try_unwrap(node).ok().expect("the writer is done");
    cluster.rt.block_on(node.shutdown());
}

/// A broker that missed a heartbeat and whose process is gone (nothing listens at its
/// address) is fenced without waiting for its session to end. The others have been as
/// silent since `admit_all` (nothing heartbeats here unless the test does), but their
/// processes still listen, so only their sessions decide, and those have not ended: had
/// the stopped broker waited for its session too, all three would be fenced at once.
#[test]
fn a_broker_whose_process_is_gone_is_fenced_before_its_session_ends() {
    let mut cluster = Cluster::start(RaftTuning::default());
    admit_all(&cluster);
    let leader = cluster.agreed_leader().unwrap();
    let gone = (1..=3).find(|&id| id != leader).unwrap();
    cluster.stop(gone);
    let fenced = |c: &Controller, id: i32| c.image().brokers.get(&id).is_some_and(|b| b.fenced);
    let took = wait_until("the stopped broker is fenced", || fenced(cluster.node(leader), gone));
    let live: Vec<i32> = (1..=3).filter(|&id| id != gone).collect();
    let fenced_live: Vec<i32> = live.iter().copied().filter(|&id| fenced(cluster.node(leader), id)).collect();
    eprintln!("broker {gone} fenced {took:?} after its process stopped");
    assert!(fenced_live.is_empty(), "the silent brokers whose processes listen were fenced too: {fenced_live:?}");
}

/// A controller opened in `dir` as node `id` with these voters (none: started alone) and a
/// controller listener at `at` (none for a node started alone).
fn open_node(
    rt: &Runtime,
    dir: &std::path::Path,
    id: i32,
    voters: &[(i32, String)],
    at: Option<&str>,
    directory: uuid::Uuid,
) -> Controller {
    let config = ControllerConfig {
        node_id: id,
        advertised: ("127.0.0.1".into(), 19090 + id as u16),
        inter_broker_advertised: None,
        rack: None,
        cluster_id: None,
        default_partitions: 1,
        default_replication_factor: 1,
        voters: voters.to_vec(),
        controller_addr: None,
        directory_id: Some(directory),
        tuning: RaftTuning::default(),
        leader_rebalance_interval: None,
    };
    let (dir, at) = (dir.to_owned(), at.map(str::to_owned));
    rt.block_on(async move {
        let listener = match at {
            Some(at) => Some(tokio::net::TcpListener::bind(at).await.unwrap()),
            None => None,
        };
        Controller::open(&dir, config, listener).await.unwrap()
    })
}

/// Where `c`'s view of the membership says member `id` listens.
fn named_at(c: &Controller, id: u64) -> Option<String> {
    c.raft_metrics().membership_config.membership().get_node(&id).map(|n| n.addr.clone())
}

fn voters_of(c: &Controller) -> Vec<u64> {
    c.raft_metrics().membership_config.membership().voter_ids().collect()
}

/// One partition on broker 1: placed by hand, so it needs no broker unfenced (nothing
/// heartbeats here).
fn on_broker_1(name: &str) -> NewTopic {
    NewTopic {
        name: name.into(),
        num_partitions: -1,
        replication_factor: -1,
        assignments: vec![(0, vec![1])],
        configs: vec![],
    }
}

/// KIP-853's way from one controller to a quorum (Kafka's `--standalone`): a node started
/// alone, restarted with `--controller-quorum-voters` naming only itself, keeps its
/// metadata and is a one-voter cluster. Its voter is named where it now listens (started
/// alone, it was named at no address), so brokers that join as learners can be made
/// voters, and the grown quorum decides without the first node. A voter restarted at
/// another address is named there (Kafka's UpdateRaftVoter): the others' replication and
/// vote requests reach it, instead of an address where nothing listens.
#[test]
fn a_single_node_grows_into_a_quorum_and_a_voter_follows_its_address() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dirs: Vec<TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let directory = |id: i32| uuid::Uuid::from_u128(0x100 + id as u128);
    let free = |rt: &Runtime| {
        let l = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        l.local_addr().unwrap().to_string()
    };

    let single = open_node(&rt, dirs[0].path(), 1, &[], None, directory(1));
    assert!(!single.is_clustered());
    rt.block_on(single.create_topic(&on_broker_1("from-the-single-node"), false)).unwrap();
    rt.block_on(single.shutdown());
    drop(single);

    let addr = [free(&rt), free(&rt), free(&rt)];
    let n1 = open_node(&rt, dirs[0].path(), 1, &[(1, addr[0].clone())], Some(&addr[0]), directory(1));
    assert!(n1.is_clustered(), "a quorum of one named by the flags is a cluster");
    assert_eq!(n1.leader(), Some(1));
    assert!(has_topic(&n1, "from-the-single-node"));
    wait_until("node 1 is named where it listens", || named_at(&n1, 1).as_deref() == Some(addr[0].as_str()));
    assert_eq!(named(&n1, 1), Some(directory(1)));

    let seed = [(1, addr[0].clone())];
    let mut learners = Vec::new();
    for id in [2, 3] {
        let i = id as usize - 1;
        let node = open_node(&rt, dirs[i].path(), id, &seed, Some(&addr[i]), directory(id));
        wait_until("the learner follows the log", || has_topic(&node, "from-the-single-node"));
        wait_until("the learner is named by its directory", || named(&n1, id as u64) == Some(directory(id)));
        rt.block_on(node.add_raft_voter(id, directory(id))).unwrap();
        learners.push(node);
    }
    wait_until("the voters are 1, 2 and 3", || voters_of(&n1) == [1, 2, 3]);
    let [n2, n3]: [Controller; 2] = learners.try_into().ok().unwrap();

    // Without node 1, the two it was grown with decide.
    rt.block_on(n1.shutdown());
    drop(n1);
    rt.block_on(n2.create_topic(&on_broker_1("without-node-1"), false)).unwrap();
    wait_until("node 3 has it", || has_topic(&n3, "without-node-1"));

    // Node 1 comes back at another address (its flags name the others where they are).
    let moved = free(&rt);
    let all = [(1, moved.clone()), (2, addr[1].clone()), (3, addr[2].clone())];
    let n1 = open_node(&rt, dirs[0].path(), 1, &all, Some(&moved), directory(1));
    wait_until("nodes 2 and 3 name node 1 at its new address", || {
        [&n2, &n3].iter().all(|c| named_at(c, 1).as_deref() == Some(moved.as_str()))
    });
    wait_until("node 1 catches up", || has_topic(&n1, "without-node-1"));
    // Whichever of 2 and 3 is stopped, node 1 and the other decide.
    let (stopped, other) = if n2.leader() == Some(2) { (n2, n3) } else { (n3, n2) };
    rt.block_on(stopped.shutdown());
    drop(stopped);
    rt.block_on(other.create_topic(&on_broker_1("after-the-move"), false)).unwrap();
    wait_until("node 1 has it", || has_topic(&n1, "after-the-move"));
    rt.block_on(other.shutdown());
    rt.block_on(n1.shutdown());
}
