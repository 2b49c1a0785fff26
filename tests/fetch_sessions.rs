//! KIP-227 incremental fetch sessions over the wire: a full fetch opens a session, later
//! fetches name only what changed and get only the partitions with news, and the session
//! errors are Kafka's.

mod common;

use common::batches;
use common::requests::*;
use common::TestBroker;
use kafka_protocol::messages::fetch_request::{FetchTopic, ForgottenTopic};
use kafka_protocol::messages::*;

const NO_SESSION: i16 = 0;
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
const FETCH_SESSION_TOPIC_ID_ERROR: i16 = 106;

/// Names a topic by name (Fetch v12) or by id (v13+), as the version wants.
#[derive(Clone, Copy)]
struct Topic<'a> {
    name: &'a str,
    id: uuid::Uuid,
    version: i16,
}

impl Topic<'_> {
    fn fetch(&self, partitions: &[(i32, i64)]) -> FetchTopic {
        let t = if self.version >= 13 {
            FetchTopic::default().with_topic_id(self.id)
        } else {
            FetchTopic::default().with_topic(topic_name(self.name))
        };
        t.with_partitions(partitions.iter().map(|&(p, offset)| fetch_partition(p, offset, 1 << 20)).collect())
    }

    fn forget(&self, partitions: &[i32]) -> ForgottenTopic {
        let t = if self.version >= 13 {
            ForgottenTopic::default().with_topic_id(self.id)
        } else {
            ForgottenTopic::default().with_topic(topic_name(self.name))
        };
        t.with_partitions(partitions.to_vec())
    }
}

fn session_fetch(id: i32, epoch: i32, topics: Vec<FetchTopic>, forgotten: Vec<ForgottenTopic>) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(200)
        .with_min_bytes(1)
        .with_max_bytes(50 << 20)
        .with_session_id(id)
        .with_session_epoch(epoch)
        .with_topics(topics)
        .with_forgotten_topics_data(forgotten)
}

/// `(partition, record values)` of every partition in the answer, in order.
fn answered(resp: &FetchResponse) -> Vec<(i32, Vec<String>)> {
    resp.responses
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (p.partition_index, batches::decode_values(&p.records))))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incremental_fetch_names_only_what_changed_and_hears_only_news() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let id = c.create_topic_ok("sessions", 3, &[]).await;
    for version in [12, 16] {
        let t = Topic { name: "sessions", id, version };
        let start: Vec<i64> = {
            let mut ends = Vec::new();
            for p in 0..3 {
                ends.push(c.fetch("sessions", p, 0).await.high_watermark);
            }
            ends
        };
        c.produce_ok("sessions", 0, batches::values(&format!("a{version}"), 2)).await;

        // The full fetch opens a session and answers every partition.
        let all = t.fetch(&[(0, start[0]), (1, start[1]), (2, start[2])]);
        let resp = c.send(version, session_fetch(0, 0, vec![all], vec![])).await;
        assert_eq!(resp.error_code, 0);
        let session = resp.session_id;
        assert!(session > 0, "v{version}: no session opened");
        let expected_first =
            vec![(0, vec![format!("a{version}-0"), format!("a{version}-1")]), (1, vec![]), (2, vec![])];
        assert_eq!(answered(&resp), expected_first);

        // Partition 0 moved on; nothing else happened: the answer is empty (after max_wait).
        let resp = c.send(version, session_fetch(session, 1, vec![t.fetch(&[(0, start[0] + 2)])], vec![])).await;
        assert_eq!((resp.error_code, resp.session_id), (0, session));
        assert_eq!(answered(&resp), vec![]);

        // A record on partition 1: only it is answered, though the request names nothing.
        c.produce_ok("sessions", 1, batches::values(&format!("b{version}"), 1)).await;
        let resp = c.send(version, session_fetch(session, 2, vec![], vec![])).await;
        assert_eq!(answered(&resp), vec![(1, vec![format!("b{version}-0")])]);

        // A retried or skipped epoch is refused, and the session lives on.
        for stale in [2, 4] {
            let resp = c.send(version, session_fetch(session, stale, vec![], vec![])).await;
            assert_eq!((resp.error_code, resp.session_id), (INVALID_FETCH_SESSION_EPOCH, NO_SESSION as i32));
            assert!(resp.responses.is_empty());
        }
        // The client did not say partition 1 moved, so the session still reads it from
        // where it was and the record comes again. Then partitions 1 and 2 are forgotten.
        let resp = c.send(version, session_fetch(session, 3, vec![], vec![])).await;
        assert_eq!(answered(&resp), vec![(1, vec![format!("b{version}-0")])]);
        let resp = c.send(version, session_fetch(session, 4, vec![], vec![t.forget(&[1, 2])])).await;
        assert_eq!(answered(&resp), vec![]);
        c.produce_ok("sessions", 2, batches::values("forgotten", 1)).await;
        c.produce_ok("sessions", 0, batches::values(&format!("c{version}"), 1)).await;
        let resp = c.send(version, session_fetch(session, 5, vec![], vec![])).await;
        assert_eq!(answered(&resp), vec![(0, vec![format!("c{version}-0")])]);

        // Naming the session in a full fetch without a session closes it.
        let resp = c.send(version, session_fetch(session, -1, vec![t.fetch(&[(0, 0)])], vec![])).await;
        assert_eq!((resp.error_code, resp.session_id), (0, 0));
        let resp = c.send(version, session_fetch(session, 6, vec![], vec![])).await;
        assert_eq!(resp.error_code, FETCH_SESSION_ID_NOT_FOUND);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_opened_by_name_is_not_used_by_id() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let id = c.create_topic_ok("naming", 1, &[]).await;
    let by_name = Topic { name: "naming", id, version: 12 };
    let resp = c.send(12, session_fetch(0, 0, vec![by_name.fetch(&[(0, 0)])], vec![])).await;
    assert!(resp.session_id > 0);
    let resp = c.send(16, session_fetch(resp.session_id, 1, vec![], vec![])).await;
    assert_eq!(resp.error_code, FETCH_SESSION_TOPIC_ID_ERROR);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_cache_slots_every_fetch_is_full() {
    let broker = TestBroker::start_with(|c| c.max_incremental_fetch_session_cache_slots = 0).await;
    let mut c = broker.client().await;
    let id = c.create_topic_ok("full", 1, &[]).await;
    c.produce_ok("full", 0, batches::values("v", 1)).await;
    let t = Topic { name: "full", id, version: 16 };
    let resp = c.send(16, session_fetch(0, 0, vec![t.fetch(&[(0, 0)])], vec![])).await;
    assert_eq!((resp.error_code, resp.session_id), (0, 0));
    assert_eq!(answered(&resp), vec![(0, vec!["v-0".to_owned()])]);
}
