//! Admin requests any client can send (there is no authorizer yet) that must not turn
//! the broker off: an UnregisterBroker naming the node itself, topics named like the
//! broker's internal ones, a CreatePartitions assignment naming brokers that do not exist.
//! Each failed before its fix: the single node was left with every partition leaderless
//! (also after a restart), the internal topics could be created by a client, and the
//! assignment was dropped (any broker id accepted).

mod common;

use common::batches::values;
use common::requests::*;
use common::TestBroker;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::{CreatePartitionsAssignment, CreatePartitionsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{BrokerId, CreatePartitionsRequest, MetadataRequest, UnregisterBrokerRequest};

const CREATE_PARTITIONS_V: i16 = 3;

async fn leaders(c: &mut common::Client, topic: &str) -> Vec<i32> {
    let md = c.metadata(&[topic]).await;
    md.topics[0].partitions.iter().map(|p| p.leader_id.0).collect()
}

/// The 15-byte request of the adversarial pass: UnregisterBroker v0 for the node itself.
/// The node registers again at once and keeps serving; a restart finds it registered.
#[tokio::test]
async fn a_single_node_unregistered_by_a_client_registers_again_and_keeps_serving() {
    let mut broker = TestBroker::start().await;
    let me = broker.config().node_id;
    let mut c = broker.client().await;
    c.create_topic_ok("kept", 2, &[]).await;
    c.produce_ok("kept", 0, values("before", 3)).await;

    let resp = c.send(0, UnregisterBrokerRequest::default().with_broker_id(BrokerId(me))).await;
    assert_eq!(resp.error_code, 0, "{:?}", resp.error_message);

    let md = c.metadata(&["kept"]).await;
    assert_eq!(md.brokers.iter().map(|b| b.node_id.0).collect::<Vec<_>>(), vec![me], "registered again");
    assert_eq!(leaders(&mut c, "kept").await, vec![me, me]);
    assert_eq!(c.produce_ok("kept", 0, values("after", 2)).await, 3);
    assert_eq!(c.produce_ok("kept", 1, values("after", 2)).await, 0);

    broker.restart().await;
    let mut c = broker.client().await;
    assert_eq!(leaders(&mut c, "kept").await, vec![me, me]);
    assert_eq!(c.produce_ok("kept", 0, values("restarted", 1)).await, 5);
    let got = common::batches::decode_values(&c.fetch("kept", 0, 0).await.records);
    assert_eq!(got.len(), 6, "{got:?}");
}

#[tokio::test]
async fn clients_cannot_create_the_internal_topics() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    for name in ["__cluster_metadata", "__consumer_offsets"] {
        let r = c.create_topic(name, 1, &[]).await;
        assert_eq!(r.error_code, ResponseError::InvalidRequest.code(), "{name}: {:?}", r.error_message);
        let message = r.error_message.map(|m| m.to_string()).unwrap_or_default();
        assert_eq!(message, format!("Creation of internal topic {name} is prohibited."));
        // Nor by asking for it with auto-creation on.
        let req = MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(topic_name(name)))]))
            .with_allow_auto_topic_creation(true);
        let md = c.send(METADATA_V, req).await;
        assert_eq!(md.topics[0].error_code, ResponseError::UnknownTopicOrPartition.code(), "{name}");
        assert!(md.topics[0].partitions.is_empty(), "{name}");
    }
    // The broker still creates __consumer_offsets itself, as a group needs it.
    let req = kafka_protocol::messages::FindCoordinatorRequest::default().with_key(common::str("g"));
    let resp = c.send(3, req).await;
    assert_eq!(resp.error_code, 0, "{:?}", resp.error_message);
    let md = c.metadata(&["__consumer_offsets"]).await;
    assert_eq!(md.topics[0].partitions.len() as i32, broker.config().offsets_topic_num_partitions);
}

#[tokio::test]
async fn create_partitions_names_only_brokers_that_exist() {
    let broker = TestBroker::start().await;
    let me = broker.config().node_id;
    let mut c = broker.client().await;
    c.create_topic_ok("grow", 1, &[]).await;
    let grow = |count: i32, assignment: Vec<Vec<i32>>| {
        let assignments = assignment
            .into_iter()
            .map(|ids| CreatePartitionsAssignment::default().with_broker_ids(ids.into_iter().map(BrokerId).collect()))
            .collect();
        CreatePartitionsRequest::default().with_timeout_ms(30_000).with_topics(vec![CreatePartitionsTopic::default()
            .with_name(topic_name("grow"))
            .with_count(count)
            .with_assignments(Some(assignments))])
    };
    let resp = c.send(CREATE_PARTITIONS_V, grow(2, vec![vec![7]])).await;
    let r = &resp.results[0];
    assert_eq!(r.error_code, ResponseError::InvalidReplicaAssignment.code(), "{:?}", r.error_message);
    assert_eq!(leaders(&mut c, "grow").await.len(), 1, "nothing added");

    let resp = c.send(CREATE_PARTITIONS_V, grow(2, vec![vec![me]])).await;
    assert_eq!(resp.results[0].error_code, 0, "{:?}", resp.results[0].error_message);
    assert_eq!(leaders(&mut c, "grow").await, vec![me, me]);
}
