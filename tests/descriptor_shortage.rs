//! A shortage of file descriptors is temporary and stays so: a log operation that hits
//! EMFILE fails with a retriable error and the log dir stays online (before, the dir was
//! taken offline as if its disk had failed, and `__consumer_offsets` and every partition
//! in it answered KAFKA_STORAGE_ERROR until a restart); and one fetch holds a bounded
//! number of segment files open (before, one per partition with data: a consumer of
//! 5,000 partitions at `ulimit -n 4096` ran the process out).
//!
//! Alone in its binary: it lowers this process's descriptor limit, which would break
//! tests running in parallel.

mod common;

use std::collections::BTreeMap;

use common::batches::values;
use common::requests::*;
use common::TestBroker;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::FetchRequest;

const PARTITIONS: i32 = 100;
const CACHE: usize = 16;
/// What the fetch handler allows with a file cache of [`CACHE`]: a quarter of it, at
/// least 16.
const FILES_PER_FETCH: usize = 16;

fn lowest_free_descriptor() -> u64 {
    use std::os::fd::AsRawFd;
    std::fs::File::open("/dev/null").unwrap().as_raw_fd() as u64
}

fn fetch_all(offsets: &BTreeMap<i32, i64>) -> FetchRequest {
    let partitions = offsets
        .iter()
        .map(|(p, o)| {
            FetchPartition::default().with_partition(*p).with_fetch_offset(*o).with_partition_max_bytes(1 << 20)
        })
        .collect();
    FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(64 << 20)
        .with_topics(vec![FetchTopic::default().with_topic(topic_name("wide")).with_partitions(partitions)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_descriptor_shortage_fails_the_request_and_leaves_the_log_dir_online() {
    let broker = TestBroker::start_with(|c| {
        c.max_open_log_files = CACHE;
        c.log_segment_bytes = 300;
    })
    .await;
    let mut c = broker.client().await;
    c.create_topic_ok("wide", PARTITIONS, &[]).await;
    for p in 0..PARTITIONS {
        c.produce_ok("wide", p, values(&format!("p{p}"), 4)).await;
    }

    // One fetch of every partition reads at most FILES_PER_FETCH of them; the others
    // answer with no records and no error, and the next fetches read them.
    let mut offsets: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, 0)).collect();
    let mut fetches = 0;
    while offsets.values().any(|o| *o < 4) {
        fetches += 1;
        assert!(fetches <= 2 * PARTITIONS, "never read everything: {offsets:?}");
        let resp = c.send(FETCH_V, fetch_all(&offsets)).await;
        let mut with_records = 0;
        for p in &resp.responses[0].partitions {
            assert_eq!(p.error_code, 0, "partition {}", p.partition_index);
            let got = common::batches::decode_values(&p.records);
            if !got.is_empty() {
                with_records += 1;
                assert_eq!(got[0], format!("p{}-0", p.partition_index));
                *offsets.get_mut(&p.partition_index).unwrap() += got.len() as i64;
            }
        }
        assert!(with_records <= FILES_PER_FETCH, "{with_records} partitions' files held by one fetch");
    }
    assert!(fetches >= (PARTITIONS as usize).div_ceil(FILES_PER_FETCH) as i32, "{fetches} fetches");

    // No descriptor left for the segment a produce must roll to (40 records are past
    // segment.bytes): the produce fails with a retriable error. Once descriptors are free
    // again the same partition takes writes. (The kernel refuses a new descriptor when
    // the lowest free number is at the limit, however many are open.)
    let (soft, hard) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
    rlimit::setrlimit(rlimit::Resource::NOFILE, lowest_free_descriptor(), hard).unwrap();
    let starved = c.produce("wide", 0, values("starved", 40)).await;
    rlimit::setrlimit(rlimit::Resource::NOFILE, soft, hard).unwrap();
    assert_eq!(starved.error_code, ResponseError::KafkaStorageError.code(), "{:?}", starved.error_message);
    // Taken offline, every partition of the dir would answer KAFKA_STORAGE_ERROR here.
    assert_eq!(c.produce_ok("wide", 0, values("after", 4)).await, 4);
    assert_eq!(c.produce_ok("wide", 1, values("after", 4)).await, 4);
    for p in [0, 1] {
        let got = common::batches::decode_values(&c.fetch("wide", p, 0).await.records);
        assert_eq!(got[0], format!("p{p}-0"), "partition {p} still reads");
    }
    broker.shutdown().await;
}
