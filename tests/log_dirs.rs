//! Several log directories per broker (`log_dirs`, Kafka's `log.dirs`): new partitions
//! spread over them, a restart finds each where it is, DescribeLogDirs lists every
//! directory, and AlterReplicaLogDirs moves a partition while producers and consumers
//! keep going, losing, repeating or reordering nothing.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::batches;
use common::requests::*;
use common::{str, TestBroker};
use kafka_protocol::messages::alter_replica_log_dirs_request::{AlterReplicaLogDir, AlterReplicaLogDirTopic};
use kafka_protocol::messages::*;

async fn two_dir_broker() -> (TestBroker, tempfile::TempDir) {
    let other = tempfile::tempdir().unwrap();
    let second = other.path().to_path_buf();
    let broker = TestBroker::start_with(move |c| c.log_dirs = vec![c.data_dir.clone(), second]).await;
    (broker, other)
}

fn dirs_of(broker: &TestBroker) -> Vec<PathBuf> {
    broker.config().log_dirs().iter().map(|d| std::fs::canonicalize(d).unwrap()).collect()
}

/// Which log dir (index) holds `topic-partition` on disk.
fn holder(dirs: &[PathBuf], topic: &str, partition: i32) -> Vec<usize> {
    (0..dirs.len()).filter(|&i| dirs[i].join(format!("{topic}-{partition}")).is_dir()).collect()
}

async fn describe(c: &mut common::Client) -> DescribeLogDirsResponse {
    c.send(4, DescribeLogDirsRequest::default().with_topics(None)).await
}

async fn alter(c: &mut common::Client, dir: &std::path::Path, topic: &str, partition: i32) -> i16 {
    let req = AlterReplicaLogDirsRequest::default().with_dirs(vec![AlterReplicaLogDir::default()
        .with_path(str(&dir.display().to_string()))
        .with_topics(vec![AlterReplicaLogDirTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![partition])])]);
    let resp = c.send(2, req).await;
    resp.results[0].partitions[0].error_code
}

async fn read_all(c: &mut common::Client, topic: &str) -> Vec<String> {
    let mut got = Vec::new();
    loop {
        let data = c.fetch(topic, 0, got.len() as i64).await;
        assert_eq!(data.error_code, 0);
        let values = batches::decode_values(&data.records);
        if values.is_empty() {
            return got;
        }
        got.extend(values);
    }
}

#[tokio::test]
async fn partitions_spread_over_the_dirs_and_stay_there_across_a_restart() {
    let (mut broker, _other) = two_dir_broker().await;
    let dirs = dirs_of(&broker);
    let mut c = broker.client().await;
    c.create_topic_ok("spread", 4, &[]).await;
    for p in 0..4 {
        c.produce_ok("spread", p, batches::values(&format!("p{p}"), 3)).await;
    }
    let counts: Vec<usize> =
        (0..2).map(|i| (0..4).filter(|&p| holder(&dirs, "spread", p) == vec![i]).count()).collect();
    assert_eq!(counts, vec![2, 2], "fewest-partitions placement");
    let before: Vec<Vec<usize>> = (0..4).map(|p| holder(&dirs, "spread", p)).collect();

    let resp = describe(&mut c).await;
    assert_eq!(resp.results.len(), 2);
    for (r, dir) in resp.results.iter().zip(&dirs) {
        assert_eq!(r.error_code, 0);
        assert_eq!(r.log_dir.as_str(), dir.display().to_string());
        assert!(r.total_bytes > 0 && r.usable_bytes > 0);
        let spread = r.topics.iter().find(|t| t.name.0.as_str() == "spread").expect("topic listed");
        assert_eq!(spread.partitions.len(), 2);
        assert!(spread.partitions.iter().all(|p| p.partition_size > 0 && !p.is_future_key));
    }

    broker.restart().await;
    let mut c = broker.client().await;
    for p in 0..4 {
        assert_eq!(holder(&dirs, "spread", p), before[p as usize], "partition {p} stayed");
        let got = batches::decode_values(&c.fetch("spread", p, 0).await.records);
        assert_eq!(got, (0..3).map(|i| format!("p{p}-{i}")).collect::<Vec<_>>());
    }
}

#[tokio::test]
async fn alter_replica_log_dirs_errors_are_kafkas() {
    let (broker, _other) = two_dir_broker().await;
    let dirs = dirs_of(&broker);
    let mut c = broker.client().await;
    c.create_topic_ok("t", 1, &[]).await;
    assert_eq!(alter(&mut c, std::path::Path::new("/no/such/dir"), "t", 0).await, 57, "LOG_DIR_NOT_FOUND");
    assert_eq!(alter(&mut c, &dirs[1], "nope", 0).await, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    assert_eq!(alter(&mut c, &dirs[1], "t", 7).await, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    let here = holder(&dirs, "t", 0)[0];
    assert_eq!(alter(&mut c, &dirs[here], "t", 0).await, 0, "already there: nothing to do");
}

#[tokio::test]
async fn a_partition_moves_while_it_serves_and_reopens_from_its_new_dir() {
    let (mut broker, _other) = two_dir_broker().await;
    let dirs = dirs_of(&broker);
    let mut c = broker.client().await;
    // Small segments: the move copies sealed segments and an active one.
    c.create_topic_ok("moving", 1, &[("segment.bytes", "4096")]).await;
    let from = holder(&dirs, "moving", 0)[0];
    let to = 1 - from;
    let mut expected = Vec::new();
    for b in 0..40 {
        c.produce_ok("moving", 0, batches::values(&format!("a{b}-{}", "x".repeat(200)), 5)).await;
        expected.extend((0..5).map(|i| format!("a{b}-{}-{i}", "x".repeat(200))));
    }
    assert_eq!(alter(&mut c, &dirs[to], "moving", 0).await, 0);
    // Produce and fetch go on during the move; every acknowledged record comes back once, in order.
    let mut b = 0;
    loop {
        let offset = c.produce_ok("moving", 0, batches::values(&format!("b{b}"), 2)).await;
        assert_eq!(offset, expected.len() as i64, "offsets continue");
        expected.extend((0..2).map(|i| format!("b{b}-{i}")));
        b += 1;
        if holder(&dirs, "moving", 0) == vec![to] {
            break;
        }
        assert!(b < 100_000, "the move never finished");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // A few more after the swap.
    for b in 0..5 {
        c.produce_ok("moving", 0, batches::values(&format!("c{b}"), 1)).await;
        expected.push(format!("c{b}-0"));
    }
    let got = read_all(&mut c, "moving").await;
    assert!(
        got == expected,
        "{} records read, {} acknowledged, first difference at {:?}",
        got.len(),
        expected.len(),
        got.iter().zip(&expected).position(|(a, b)| a != b)
    );
    let resp = describe(&mut broker.client().await).await;
    let listed = |i: usize| resp.results[i].topics.iter().any(|t| t.name.0.as_str() == "moving");
    assert!(listed(to) && !listed(from));
    // The old copy goes right after the swap.
    for _ in 0..10_000 {
        if !dirs[from].join("moving-0-delete").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(!dirs[from].join("moving-0-delete").exists() && !dirs[to].join("moving-0-future").exists());

    broker.restart().await;
    let mut c = broker.client().await;
    assert_eq!(holder(&dirs, "moving", 0), vec![to]);
    let got = read_all(&mut c, "moving").await;
    assert!(
        got == expected,
        "{} records read, {} acknowledged, first difference at {:?}",
        got.len(),
        expected.len(),
        got.iter().zip(&expected).position(|(a, b)| a != b)
    );
}

#[tokio::test]
async fn a_partition_in_two_log_dirs_stops_the_broker_naming_both() {
    let data = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    for d in [data.path(), other.path()] {
        std::fs::create_dir_all(d.join("dup-0")).unwrap();
    }
    let config = runnel::config::BrokerConfig {
        listen: "127.0.0.1:0".into(),
        http_listen: None,
        data_dir: data.path().to_path_buf(),
        log_dirs: vec![data.path().to_path_buf(), other.path().to_path_buf()],
        ..Default::default()
    };
    let err = runnel::Broker::start(config).await.err().expect("refused").to_string();
    assert!(err.contains("dup-0") && err.contains(&*other.path().to_string_lossy()), "{err}");
}

/// A small tmpfs mounted over `dir`, unmounted on drop; `None` without the privilege.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &std::path::Path, size: &str) -> Option<Tmpfs> {
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .ok()?;
        if !out.status.success() {
            eprintln!("skipped: cannot mount a tmpfs (needs root): {}", String::from_utf8_lossy(&out.stderr));
            return None;
        }
        Some(Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// A log dir on a filesystem that fills up (ENOSPC): that dir goes offline, its partition
/// answers KAFKA_STORAGE_ERROR to produce and fetch, DescribeLogDirs reports the dir with
/// KAFKA_STORAGE_ERROR, and the other dir's partitions keep serving.
#[tokio::test]
async fn a_full_log_dir_goes_offline_and_the_other_keeps_serving() {
    let small = tempfile::tempdir().unwrap();
    let Some(_mount) = Tmpfs::mount(small.path(), "256k") else { return };
    let second = small.path().to_path_buf();
    let broker = TestBroker::start_with(move |c| c.log_dirs = vec![c.data_dir.clone(), second]).await;
    let dirs = dirs_of(&broker);
    let mut c = broker.client().await;
    c.create_topic_ok("full", 2, &[]).await;
    let on_small = (0..2).find(|&p| holder(&dirs, "full", p) == vec![1]).expect("a partition on the tmpfs");
    let healthy = 1 - on_small;

    let mut errors = Vec::new();
    for b in 0..20 {
        let resp = c.produce("full", on_small, batches::values(&format!("big{b}-{}", "y".repeat(60_000)), 1)).await;
        errors.push(resp.error_code);
        if resp.error_code != 0 {
            break;
        }
    }
    assert_eq!(errors.last(), Some(&56), "the tmpfs fills up: KAFKA_STORAGE_ERROR, after {errors:?}");
    assert!(errors.len() > 1, "some appends fit first: {errors:?}");
    // Offline now: produce and fetch of its partition fail, the dir reports the error.
    assert_eq!(c.produce("full", on_small, batches::values("small", 1)).await.error_code, 56);
    assert_eq!(c.fetch("full", on_small, 0).await.error_code, 56);
    let resp = describe(&mut c).await;
    assert_eq!(resp.results[1].error_code, 56, "{resp:?}");
    assert!(resp.results[1].topics.is_empty());
    assert_eq!(resp.results[0].error_code, 0);
    // The other dir keeps serving, and new partitions go there.
    let offset = c.produce_ok("full", healthy, batches::values("still", 3)).await;
    assert_eq!(
        batches::decode_values(&c.fetch("full", healthy, offset).await.records),
        ["still-0", "still-1", "still-2"]
    );
    c.create_topic_ok("after", 1, &[]).await;
    assert_eq!(holder(&dirs, "after", 0), vec![0]);
    assert_eq!(alter(&mut c, &dirs[1], "after", 0).await, 56, "no move into an offline dir");
    broker.shutdown().await;
}

/// A full log dir comes back without a restart once space is freed: the broker probes
/// it, reopens its partitions from their files and serves them again, with every record
/// acknowledged before, none of the refused one, and offsets going on. (Before, it stayed
/// offline until a restart, as in Kafka.)
#[tokio::test]
async fn a_full_log_dir_comes_back_once_space_is_freed() {
    let small = tempfile::tempdir().unwrap();
    let Some(_mount) = Tmpfs::mount(small.path(), "512k") else { return };
    let ballast = small.path().join("ballast");
    std::fs::write(&ballast, vec![1u8; 256 * 1024]).unwrap();
    let second = small.path().to_path_buf();
    let broker = TestBroker::start_with(move |c| c.log_dirs = vec![c.data_dir.clone(), second]).await;
    let dirs = dirs_of(&broker);
    let mut c = broker.client().await;
    c.create_topic_ok("refill", 2, &[]).await;
    let on_small = (0..2).find(|&p| holder(&dirs, "refill", p) == vec![1]).expect("a partition on the tmpfs");

    let mut acknowledged = Vec::new();
    for b in 0..20 {
        let value = format!("big{b}-{}", "y".repeat(60_000));
        let resp = c.produce("refill", on_small, batches::values(&value, 1)).await;
        if resp.error_code != 0 {
            assert_eq!(resp.error_code, 56, "the tmpfs fills up: KAFKA_STORAGE_ERROR");
            break;
        }
        assert_eq!(resp.base_offset, acknowledged.len() as i64);
        acknowledged.push(format!("{value}-0"));
    }
    assert!(!acknowledged.is_empty(), "some appends fit first");
    assert_eq!(c.produce("refill", on_small, batches::values("small", 1)).await.error_code, 56, "offline");

    std::fs::remove_file(&ballast).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let offset = loop {
        let resp = c.produce("refill", on_small, batches::values("back", 1)).await;
        if resp.error_code == 0 {
            break resp.base_offset;
        }
        assert_eq!(resp.error_code, 56);
        assert!(std::time::Instant::now() < deadline, "the log dir never came back");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(offset, acknowledged.len() as i64, "offsets go on after the last acknowledged record");
    let mut read = Vec::new();
    while read.len() <= acknowledged.len() {
        let got = c.fetch("refill", on_small, read.len() as i64).await;
        assert_eq!(got.error_code, 0);
        let values = batches::decode_values(&got.records);
        assert!(!values.is_empty(), "stuck at {}", read.len());
        read.extend(values);
    }
    acknowledged.push("back-0".into());
    assert_eq!(read, acknowledged);
    assert_eq!(describe(&mut c).await.results[1].error_code, 0, "the dir reports no error");
    broker.shutdown().await;
}

/// A crash in the middle of a move: before its commit point the source stays the
/// partition and the next start takes the move up again (as Kafka resumes its future
/// log); after it, start finishes the move.
#[tokio::test]
async fn a_move_interrupted_by_a_crash_reopens_correctly() {
    let data = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let config = runnel::config::BrokerConfig {
        listen: "127.0.0.1:0".into(),
        http_listen: None,
        data_dir: data.path().to_path_buf(),
        log_dirs: vec![data.path().to_path_buf(), other.path().to_path_buf()],
        ..Default::default()
    };
    let broker = runnel::Broker::start(config.clone()).await.unwrap();
    let mut c = common::Client::connect(broker.local_addr()).await;
    c.create_topic_ok("crashy", 1, &[]).await;
    c.produce_ok("crashy", 0, batches::values("r", 10)).await;
    drop(c);
    broker.shutdown().await;
    let dirs: Vec<PathBuf> = [data.path(), other.path()].iter().map(|d| std::fs::canonicalize(d).unwrap()).collect();
    let from = holder(&dirs, "crashy", 0)[0];
    let to = 1 - from;
    let expected: Vec<String> = (0..10).map(|i| format!("r-{i}")).collect();
    let copy_dir = |src: &std::path::Path, dst: &std::path::Path| {
        std::fs::create_dir_all(dst).unwrap();
        for e in std::fs::read_dir(src).unwrap().flatten() {
            if e.file_type().unwrap().is_file() {
                std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
            }
        }
    };

    // Crashed while copying: a partial future copy (one file, cut short). The source
    // serves, and the move is made again from it.
    let future = dirs[to].join("crashy-0-future");
    std::fs::create_dir_all(&future).unwrap();
    std::fs::write(future.join("00000000000000000000.log"), b"partial").unwrap();
    let broker = runnel::Broker::start(config.clone()).await.unwrap();
    let mut c = common::Client::connect(broker.local_addr()).await;
    assert_eq!(read_all(&mut c, "crashy").await, expected);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while holder(&dirs, "crashy", 0) != vec![to] || future.exists() {
        assert!(std::time::Instant::now() < deadline, "the interrupted move was not taken up again");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(read_all(&mut c, "crashy").await, expected);
    drop(c);
    broker.shutdown().await;

    // Crashed after the commit point of a move back: a complete copy, the source renamed
    // to -delete.
    let (from, to) = (to, from);
    let future = dirs[to].join("crashy-0-future");
    copy_dir(&dirs[from].join("crashy-0"), &future);
    std::fs::rename(dirs[from].join("crashy-0"), dirs[from].join("crashy-0-delete")).unwrap();
    let broker = runnel::Broker::start(config.clone()).await.unwrap();
    let mut c = common::Client::connect(broker.local_addr()).await;
    assert_eq!(holder(&dirs, "crashy", 0), vec![to]);
    assert!(!dirs[from].join("crashy-0-delete").exists() && !future.exists());
    assert_eq!(read_all(&mut c, "crashy").await, expected);
    assert_eq!(c.produce_ok("crashy", 0, batches::values("s", 1)).await, 10, "offsets continue");
    drop(c);
    broker.shutdown().await;
}

/// In a cluster: broker 1 leads a partition whose log dir (a small tmpfs) fills up. It
/// reports the dir's replicas to the controller, which takes 1 out of the ISR and moves
/// the leadership to broker 2, where every acknowledged record is; broker 1 then sends
/// producers there (NOT_LEADER_OR_FOLLOWER) instead of answering KAFKA_STORAGE_ERROR
/// until a restart. Once space is freed the dir comes back, broker 1 catches up as a
/// follower and rejoins the ISR, without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_cluster_a_failed_log_dir_gives_its_leadership_to_an_in_sync_replica() {
    use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
    let small = tempfile::tempdir().unwrap();
    let Some(_mount) = Tmpfs::mount(small.path(), "512k") else { return };
    let ballast = small.path().join("ballast");
    std::fs::write(&ballast, vec![1u8; 256 * 1024]).unwrap();
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let ports = runnel::server::embedded::controller_ports(2).unwrap();
    let voters: Vec<String> = ports.iter().enumerate().map(|(i, p)| format!("{}@127.0.0.1:{p}", i + 1)).collect();
    let starts: Vec<_> = (0..2)
        .map(|i| {
            let mut config = runnel::config::BrokerConfig::ephemeral(dirs[i].path());
            config.node_id = i as i32 + 1;
            config.controller_quorum_voters = runnel::config::parse_voters(&voters.join(",")).unwrap();
            if i == 0 {
                // The metadata log stays in the data dir; the topic's partition goes to
                // the first of two empty log dirs, the tmpfs.
                config.log_dirs = vec![small.path().to_path_buf(), config.data_dir.clone()];
            }
            config.validate().unwrap();
            tokio::spawn(runnel::Broker::start(config))
        })
        .collect();
    let mut brokers = Vec::new();
    for s in starts {
        brokers.push(s.await.unwrap().expect("broker starts"));
    }
    let mut to_1 = common::Client::connect(brokers[0].local_addr()).await;
    let mut to_2 = common::Client::connect(brokers[1].local_addr()).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while to_2.metadata(&[]).await.brokers.len() < 2 {
        assert!(std::time::Instant::now() < deadline, "broker 2 never joined");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let topic = CreatableTopic::default()
        .with_name(topic_name("failing"))
        .with_num_partitions(-1)
        .with_replication_factor(-1)
        .with_assignments(vec![CreatableReplicaAssignment::default()
            .with_partition_index(0)
            .with_broker_ids(vec![BrokerId(1), BrokerId(2)])]);
    let resp = to_2.send(5, CreateTopicsRequest::default().with_timeout_ms(30_000).with_topics(vec![topic])).await;
    assert_eq!(resp.topics[0].error_code, 0, "{:?}", resp.topics[0]);
    let partition = |md: &MetadataResponse| {
        let p = md.topics[0].partitions.first().map(|p| (p.leader_id.0, p.isr_nodes.iter().map(|r| r.0).collect()));
        p.unwrap_or((-1, Vec::<i32>::new()))
    };
    loop {
        let state = partition(&to_2.metadata(&["failing"]).await);
        if state == (1, vec![1, 2]) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never led by 1 with 2 in sync: {state:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let mut acked = 0;
    let mut errors = Vec::new();
    for b in 0..20 {
        let resp = to_1.produce("failing", 0, batches::values(&format!("big{b}-{}", "y".repeat(60_000)), 1)).await;
        errors.push(resp.error_code);
        if resp.error_code != 0 {
            break;
        }
        acked += 1;
    }
    assert_eq!(errors.last(), Some(&56), "the tmpfs fills up: KAFKA_STORAGE_ERROR, after {errors:?}");
    assert!(acked > 0, "some appends fit first: {errors:?}");

    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let state = partition(&to_2.metadata(&["failing"]).await);
        if state == (2, vec![2]) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "leadership never moved off the failed dir: {state:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Broker 1 sends producers to the new leader, which has every acknowledged record.
    let resp = to_1.produce_acks("failing", 0, batches::values("after", 1), -1).await;
    assert_eq!(resp.error_code, 6, "NOT_LEADER_OR_FOLLOWER: {resp:?}");
    let offset = to_2.produce_ok("failing", 0, batches::values("after", 1)).await;
    assert_eq!(offset, acked, "one record per acknowledged batch before it");
    assert_eq!(batches::decode_values(&to_2.fetch("failing", 0, offset).await.records), ["after-0"]);

    std::fs::remove_file(&ballast).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (leader, isr) = partition(&to_2.metadata(&["failing"]).await);
        if leader == 2 && isr.contains(&1) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "broker 1 never rejoined the ISR: {:?}", (leader, isr));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop((to_1, to_2));
    let mut brokers = brokers.into_iter();
    let (b1, b2) = (brokers.next().unwrap(), brokers.next().unwrap());
    tokio::join!(b1.shutdown(), b2.shutdown());
}

/// The disk under the metadata log fills up: the controller's Raft stops on the first
/// entry that does not fit (openraft does not restart it), and `Broker::failed` says
/// why. The binary exits on that (`main.rs`): a node whose metadata no longer moves must
/// not go on serving as if it followed the cluster (in a cluster it would keep
/// heartbeating, so nobody would fence it, and tell clients about leaders that moved).
#[tokio::test(flavor = "multi_thread")]
async fn a_metadata_log_that_cannot_be_written_fails_the_broker() {
    use runnel::controller::ConfigChange;
    let data = tempfile::tempdir().unwrap();
    let Some(_mount) = Tmpfs::mount(data.path(), "4m") else { return };
    let path = data.path().to_path_buf();
    let broker = TestBroker::start_with(move |c| c.data_dir = path).await;
    broker.client().await.create_topic_ok("t", 1, &[]).await;
    for (name, block) in [("filler", "1M"), ("filler.small", "1k")] {
        let _ = std::process::Command::new("dd")
            .args(["if=/dev/zero", &format!("of={}", data.path().join(name).display()), &format!("bs={block}")])
            .stderr(std::process::Stdio::null())
            .status();
    }
    let controller = broker.broker().context().controller.clone();
    let reason = {
        let failed = broker.broker().failed();
        tokio::pin!(failed);
        let mut reason = None;
        // A config change appends to the metadata log and touches no partition file.
        for i in 0..20 {
            let change = vec![ConfigChange::Set("retention.ms".into(), (60_000 + i).to_string())];
            let answer = controller.alter_topic_configs("t", &change, false).await;
            if let Ok(r) = tokio::time::timeout(Duration::from_millis(200), &mut failed).await {
                assert!(answer.is_err(), "the change that did not fit was not acknowledged");
                reason = Some(r);
                break;
            }
        }
        reason.expect("20 metadata changes on a full disk, and Raft still runs")
    };
    assert!(reason.contains("No space left on device"), "{reason}");
    // It stops serving by itself (an embedded broker too, with no process to exit): its
    // listener closes.
    let addr = broker.addr();
    let mut closed = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(closed, "the client listener still accepts after the metadata log failed");
    broker.shutdown().await;
}
