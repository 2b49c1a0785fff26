//! Descriptors do not grow with partitions × segments: with `max_open_log_files` at 16,
//! 400 partitions (several segments each) are created, written, reread and reopened
//! while the process holds only a bounded number of extra descriptors.
//!
//! Alone in its binary: it counts this process's descriptors, which other tests running
//! in parallel would change.

mod common;

use common::batches::values;
use common::TestBroker;

const PARTITIONS: i32 = 400;
const CACHE: usize = 16;
/// Sockets, the metadata log, the data dir lock, tokio and the test's own files.
const SLACK: usize = 48;

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descriptors_stay_bounded_with_many_partitions_and_segments() {
    let before = open_descriptors();
    let mut broker = TestBroker::start_with(|c| {
        c.max_open_log_files = CACHE;
        c.log_segment_bytes = 300;
    })
    .await;
    let mut c = broker.client().await;
    c.create_topic_ok("wide", PARTITIONS, &[]).await;
    for round in 0..3 {
        for p in 0..PARTITIONS {
            // Each batch is past segment.bytes: every round rolls a new segment.
            let offset = c.produce_ok("wide", p, values(&format!("r{round}-p{p}"), 4)).await;
            assert_eq!(offset, 4 * round);
        }
    }
    let held = open_descriptors() - before;
    assert!(held <= CACHE + SLACK, "{held} descriptors held for {PARTITIONS} partitions x {{2,3}} segments");
    let segments = std::fs::read_dir(broker.data_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("wide-"))
        .flat_map(|e| std::fs::read_dir(e.path()).unwrap().flatten())
        .filter(|f| f.file_name().to_string_lossy().ends_with(".log"))
        .count();
    assert!(segments >= 2 * PARTITIONS as usize, "{segments} segments");

    broker.restart().await;
    let mut c = broker.client().await;
    for p in 0..PARTITIONS {
        let got = c.fetch("wide", p, 0).await;
        let values = common::batches::decode_values(&got.records);
        assert_eq!(values.len(), 12, "partition {p}");
        assert_eq!(values[0], format!("r0-p{p}-0"));
    }
    let held = open_descriptors() - before;
    assert!(held <= CACHE + SLACK, "{held} descriptors held after reading every partition");
    broker.shutdown().await;
}
