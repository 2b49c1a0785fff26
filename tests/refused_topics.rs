//! CreateTopics and CreatePartitions when a partition's files cannot be opened: the
//! client gets KAFKA_STORAGE_ERROR with a message, and nothing of the change exists
//! afterwards (no topic, no extra partitions, no directories), also after a restart.
//!
//! The failure is made with a plain file where a partition's directory must go: that
//! fails for root too (chmod tricks do not, and the CI runs as root).

mod common;

use common::requests::*;
use common::TestBroker;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{CreatePartitionsRequest, MetadataRequest};

const CREATE_PARTITIONS_V: i16 = 3;

async fn partitions_in_metadata(c: &mut common::Client, topic: &str) -> Option<usize> {
    let req = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(topic_name(topic)))]))
        .with_allow_auto_topic_creation(false);
    let resp = c.send(METADATA_V, req).await;
    let t = &resp.topics[0];
    (t.error_code == 0).then_some(t.partitions.len())
}

#[tokio::test]
async fn create_topics_that_cannot_open_a_partition_is_refused_and_leaves_nothing() {
    let mut broker = TestBroker::start().await;
    let blocker = broker.data_dir().join("blocked-2");
    std::fs::write(&blocker, b"not a directory").unwrap();
    let mut c = broker.client().await;

    let resp = c.send(CREATE_TOPICS_V, create_topics_request("blocked", 4, 1, &[])).await;
    let t = &resp.topics[0];
    assert_eq!(t.error_code, ResponseError::KafkaStorageError.code(), "{:?}", t.error_message);
    let message = t.error_message.as_ref().map(|m| m.to_string()).unwrap_or_default();
    assert!(message.contains("blocked-2"), "the message names the partition: {message}");
    assert_eq!(partitions_in_metadata(&mut c, "blocked").await, None);
    for p in [0, 1, 3] {
        assert!(!broker.data_dir().join(format!("blocked-{p}")).exists(), "blocked-{p} left behind");
    }
    assert!(blocker.is_file(), "a file the broker did not create is not removed");

    // Nothing was committed: a restart does not bring the topic back either.
    broker.restart().await;
    let mut c = broker.client().await;
    assert_eq!(partitions_in_metadata(&mut c, "blocked").await, None);

    // Once the disk is fine the same request succeeds.
    std::fs::remove_file(&blocker).unwrap();
    let resp = c.send(CREATE_TOPICS_V, create_topics_request("blocked", 4, 1, &[])).await;
    assert_eq!(resp.topics[0].error_code, 0);
    assert_eq!(partitions_in_metadata(&mut c, "blocked").await, Some(4));
}

#[tokio::test]
async fn create_partitions_that_cannot_open_one_is_refused_and_adds_none() {
    let mut broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let resp = c.send(CREATE_TOPICS_V, create_topics_request("grow", 1, 1, &[])).await;
    assert_eq!(resp.topics[0].error_code, 0);
    let blocker = broker.data_dir().join("grow-3");
    std::fs::write(&blocker, b"not a directory").unwrap();

    let grow = |count| {
        CreatePartitionsRequest::default().with_timeout_ms(30_000).with_topics(vec![CreatePartitionsTopic::default()
            .with_name(topic_name("grow"))
            .with_count(count)
            .with_assignments(None)])
    };
    let resp = c.send(CREATE_PARTITIONS_V, grow(5)).await;
    let r = &resp.results[0];
    assert_eq!(r.error_code, ResponseError::KafkaStorageError.code(), "{:?}", r.error_message);
    assert_eq!(partitions_in_metadata(&mut c, "grow").await, Some(1));
    for p in [1, 2, 4] {
        assert!(!broker.data_dir().join(format!("grow-{p}")).exists(), "grow-{p} left behind");
    }

    broker.restart().await;
    let mut c = broker.client().await;
    assert_eq!(partitions_in_metadata(&mut c, "grow").await, Some(1));
    std::fs::remove_file(&blocker).unwrap();
    let resp = c.send(CREATE_PARTITIONS_V, grow(5)).await;
    assert_eq!(resp.results[0].error_code, 0, "{:?}", resp.results[0].error_message);
    assert_eq!(partitions_in_metadata(&mut c, "grow").await, Some(5));
}
