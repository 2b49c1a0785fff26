//! Consumer-group bad input over the wire: each gets Kafka's error code and the group
//! keeps working afterwards.

mod common;

use bytes::Bytes;
use common::TestBroker;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const OFFSET_METADATA_TOO_LARGE: i16 = 12;
const ILLEGAL_GENERATION: i16 = 22;
const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
const UNKNOWN_MEMBER_ID: i16 = 25;
const INVALID_SESSION_TIMEOUT: i16 = 26;
const REBALANCE_IN_PROGRESS: i16 = 27;
const NON_EMPTY_GROUP: i16 = 68;
const GROUP_ID_NOT_FOUND: i16 = 69;
const MEMBER_ID_REQUIRED: i16 = 79;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn join(group: &str, member: &str, protocol_type: &str, session_ms: i32) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(session_ms)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(member))
        .with_protocol_type(s(protocol_type))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(Bytes::from_static(b"m"))])
}

fn commit(
    group: &str,
    member: &str,
    generation: i32,
    topic: &str,
    partition: i32,
    metadata: &str,
) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member))
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(TopicName(s(topic))).with_partitions(vec![
            OffsetCommitRequestPartition::default()
                .with_partition_index(partition)
                .with_committed_offset(5)
                .with_committed_metadata(Some(s(metadata))),
        ])])
}

fn commit_error(r: &OffsetCommitResponse) -> i16 {
    r.topics[0].partitions[0].error_code
}

/// Join with the v5 two-step dance and sync as leader: a Stable one-member group.
async fn stable_member(c: &mut common::Client, group: &str) -> (String, i32) {
    let first = c.send(5, join(group, "", "consumer", 10_000)).await;
    assert_eq!(first.error_code, MEMBER_ID_REQUIRED);
    let joined = c.send(5, join(group, first.member_id.as_str(), "consumer", 10_000)).await;
    assert_eq!(joined.error_code, 0);
    let member = joined.member_id.to_string();
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(joined.generation_id)
        .with_member_id(s(&member))
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(s(&member))
            .with_assignment(Bytes::from_static(b"a"))]);
    let synced = c.send(3, sync).await;
    assert_eq!(synced.error_code, 0);
    assert_eq!(synced.assignment, Bytes::from_static(b"a"));
    (member, joined.generation_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_joins_get_kafka_error_codes() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let (_member, _) = stable_member(&mut c, "g1").await;
    // Another protocol type than the group's.
    let r = c.send(5, join("g1", "", "connect", 10_000)).await;
    assert_eq!(r.error_code, INCONSISTENT_GROUP_PROTOCOL);
    // No protocol type at all.
    let r = c.send(5, join("g2", "", "", 10_000)).await;
    assert_eq!(r.error_code, INCONSISTENT_GROUP_PROTOCOL);
    // Session timeout outside [6 s, 30 min].
    let r = c.send(5, join("g3", "", "consumer", 10)).await;
    assert_eq!(r.error_code, INVALID_SESSION_TIMEOUT);
    // A member id the coordinator never handed out.
    let r = c.send(5, join("g1", "made-up-member", "consumer", 10_000)).await;
    assert_eq!(r.error_code, UNKNOWN_MEMBER_ID);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_commits_and_heartbeats_get_kafka_error_codes() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    c.create_topic_ok("t", 2, &[]).await;
    let (member, generation) = stable_member(&mut c, "g").await;
    // Unknown member, stale generation.
    let r = c.send(8, commit("g", "stranger", generation, "t", 0, "")).await;
    assert_eq!(commit_error(&r), UNKNOWN_MEMBER_ID);
    let r = c.send(8, commit("g", &member, generation - 1, "t", 0, "")).await;
    assert_eq!(commit_error(&r), ILLEGAL_GENERATION);
    // A "simple" commit while the group has members.
    let r = c.send(8, commit("g", "", -1, "t", 0, "")).await;
    assert_eq!(commit_error(&r), ILLEGAL_GENERATION);
    // Partitions that do not exist, oversized metadata.
    let r = c.send(8, commit("g", &member, generation, "t", 7, "")).await;
    assert_eq!(commit_error(&r), UNKNOWN_TOPIC_OR_PARTITION);
    let r = c.send(8, commit("g", &member, generation, "nope", 0, "")).await;
    assert_eq!(commit_error(&r), UNKNOWN_TOPIC_OR_PARTITION);
    let r = c.send(8, commit("g", &member, generation, "t", 0, &"x".repeat(5000))).await;
    assert_eq!(commit_error(&r), OFFSET_METADATA_TOO_LARGE);
    // Heartbeats.
    let hb = |m: &str, g: i32| {
        HeartbeatRequest::default().with_group_id(GroupId(s("g"))).with_member_id(s(m)).with_generation_id(g)
    };
    assert_eq!(c.send(4, hb("stranger", generation)).await.error_code, UNKNOWN_MEMBER_ID);
    assert_eq!(c.send(4, hb(&member, generation + 1)).await.error_code, ILLEGAL_GENERATION);
    assert_eq!(c.send(4, hb(&member, generation)).await.error_code, 0);
    // Nothing above wedged the group: a valid commit still lands and reads back.
    let r = c.send(8, commit("g", &member, generation, "t", 1, "ok")).await;
    assert_eq!(commit_error(&r), 0);
    let fetched = c
        .send(
            7,
            OffsetFetchRequest::default().with_group_id(GroupId(s("g"))).with_topics(Some(vec![
                offset_fetch_request::OffsetFetchRequestTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partition_indexes(vec![0, 1]),
            ])),
        )
        .await;
    let parts = &fetched.topics[0].partitions;
    assert_eq!((parts[0].committed_offset, parts[1].committed_offset), (-1, 5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_member_makes_the_old_one_rejoin_and_delete_groups_refuses_non_empty_groups() {
    let broker = TestBroker::start().await;
    let mut a = broker.client().await;
    let mut b = broker.client().await;
    let (member_a, generation) = stable_member(&mut a, "g").await;
    // b's join parks until a rejoins; meanwhile a's heartbeat says REBALANCE_IN_PROGRESS.
    let first = b.send(5, join("g", "", "consumer", 10_000)).await;
    assert_eq!(first.error_code, MEMBER_ID_REQUIRED);
    let b_id = first.member_id.to_string();
    let pending = tokio::spawn(async move { b.send(5, join("g", &b_id, "consumer", 10_000)).await });
    let hb = HeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(&member_a))
        .with_generation_id(generation);
    let mut rebalancing = false;
    for _ in 0..100 {
        if a.send(4, hb.clone()).await.error_code == REBALANCE_IN_PROGRESS {
            rebalancing = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(rebalancing, "the existing member is told to rejoin");
    let rejoined = a.send(5, join("g", &member_a, "consumer", 10_000)).await;
    let b_joined = pending.await.unwrap();
    assert_eq!(rejoined.error_code, 0);
    assert_eq!(b_joined.error_code, 0);
    assert_eq!(rejoined.generation_id, generation + 1);
    assert_eq!(b_joined.generation_id, generation + 1);
    assert_eq!(rejoined.members.len() + b_joined.members.len(), 2, "only the leader gets the member list");

    let del =
        a.send(2, DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("g")), GroupId(s("nope"))])).await;
    assert_eq!(del.results[0].error_code, NON_EMPTY_GROUP);
    assert_eq!(del.results[1].error_code, GROUP_ID_NOT_FOUND);
}
