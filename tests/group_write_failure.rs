//! A group coordinator whose `__consumer_offsets` writes fail, seen from a client: each
//! request whose decision had records to write gets the Kafka error that Kafka gives for
//! that append failure (`protocol::errors::offsets_write_error`), and a failed
//! assignment write makes the group rebalance.

mod common;

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use common::TestBroker;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use runnel::coordinator::offsets_codec::OffsetsRecord;
use runnel::coordinator::writer::AppendFuture;
use runnel::coordinator::{OffsetsWriteError, OffsetsWriter};

const UNKNOWN_SERVER_ERROR: i16 = -1;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const REBALANCE_IN_PROGRESS: i16 = 27;
const MEMBER_ID_REQUIRED: i16 = 79;

/// Takes every append, or fails every append with the error it is set to.
#[derive(Default)]
struct SwitchableWriter {
    fail: Mutex<Option<OffsetsWriteError>>,
}

impl SwitchableWriter {
    fn fail_with(&self, e: Option<OffsetsWriteError>) {
        *self.fail.lock().unwrap() = e;
    }
}

impl OffsetsWriter for SwitchableWriter {
    fn append<'a>(&'a self, _partition: i32, _records: &'a [OffsetsRecord]) -> AppendFuture<'a> {
        let outcome = match *self.fail.lock().unwrap() {
            Some(e) => Err(e),
            None => Ok(()),
        };
        Box::pin(async move { outcome })
    }
}

async fn start() -> (TestBroker, Arc<SwitchableWriter>) {
    let writer = Arc::new(SwitchableWriter::default());
    (TestBroker::start_with_offsets_writer(writer.clone()).await, writer)
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn join(group: &str, member: &str, instance: Option<&str>) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(member))
        .with_group_instance_id(instance.map(s))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(Bytes::from_static(b"m"))])
}

fn sync(group: &str, member: &str, generation: i32, instance: Option<&str>) -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(generation)
        .with_member_id(s(member))
        .with_group_instance_id(instance.map(s))
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(s(member))
            .with_assignment(Bytes::from_static(b"a"))])
}

fn commit(group: &str, topic: &str) -> OffsetCommitRequest {
    let partition = |p| OffsetCommitRequestPartition::default().with_partition_index(p).with_committed_offset(5);
    OffsetCommitRequest::default().with_group_id(GroupId(s(group))).with_generation_id_or_member_epoch(-1).with_topics(
        vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partitions(vec![partition(0), partition(1)])],
    )
}

/// A dynamic member joined (v5 two-step) into generation 1, not yet synced.
async fn joined(c: &mut common::Client, group: &str) -> (String, i32) {
    let first = c.send(5, join(group, "", None)).await;
    assert_eq!(first.error_code, MEMBER_ID_REQUIRED);
    let joined = c.send(5, join(group, first.member_id.as_str(), None)).await;
    assert_eq!(joined.error_code, 0);
    (joined.member_id.to_string(), joined.generation_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_assignment_write_answers_sync_group_with_not_coordinator_and_rebalances() {
    let (broker, writer) = start().await;
    let mut c = broker.client().await;
    let (member, generation) = joined(&mut c, "g").await;
    writer.fail_with(Some(OffsetsWriteError::Storage));
    let r = c.send(3, sync("g", &member, generation, None)).await;
    assert_eq!(r.error_code, NOT_COORDINATOR);
    assert!(r.assignment.is_empty());
    writer.fail_with(None);
    // The group gave up that generation: the member hears of the rebalance and rejoins.
    let hb = HeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(&member))
        .with_generation_id(generation);
    assert_eq!(c.send(4, hb).await.error_code, REBALANCE_IN_PROGRESS);
    let rejoined = c.send(5, join("g", &member, None)).await;
    assert_eq!((rejoined.error_code, rejoined.generation_id), (0, generation + 1));
    let r = c.send(3, sync("g", &member, rejoined.generation_id, None)).await;
    assert_eq!((r.error_code, r.assignment), (0, Bytes::from_static(b"a")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_static_rejoin_write_answers_join_group_with_coordinator_not_available() {
    let (broker, writer) = start().await;
    let mut c = broker.client().await;
    let first = c.send(5, join("g", "", Some("i"))).await;
    assert_eq!(first.error_code, 0, "a static member gets its id without MEMBER_ID_REQUIRED");
    let old = first.member_id.to_string();
    assert_eq!(c.send(3, sync("g", &old, first.generation_id, Some("i"))).await.error_code, 0);
    // The instance restarts: its rejoin replaces the member id, which must be written.
    writer.fail_with(Some(OffsetsWriteError::Unavailable));
    let r = c.send(5, join("g", "", Some("i"))).await;
    assert_eq!(r.error_code, COORDINATOR_NOT_AVAILABLE);
    writer.fail_with(None);
    let r = c.send(5, join("g", "", Some("i"))).await;
    assert_eq!(r.error_code, 0);
    assert_ne!(r.member_id.as_str(), old);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_commit_write_answers_every_partition_with_the_mapped_error() {
    let (broker, writer) = start().await;
    let mut c = broker.client().await;
    c.create_topic_ok("t", 2, &[]).await;
    for (e, code) in [
        (OffsetsWriteError::Unavailable, COORDINATOR_NOT_AVAILABLE),
        (OffsetsWriteError::Storage, NOT_COORDINATOR),
        (OffsetsWriteError::Rejected, UNKNOWN_SERVER_ERROR),
    ] {
        writer.fail_with(Some(e));
        let r = c.send(8, commit("g", "t")).await;
        let codes: Vec<i16> = r.topics[0].partitions.iter().map(|p| p.error_code).collect();
        assert_eq!(codes, vec![code, code], "{e:?}");
    }
    writer.fail_with(None);
    let r = c.send(8, commit("g", "t")).await;
    let codes: Vec<i16> = r.topics[0].partitions.iter().map(|p| p.error_code).collect();
    assert_eq!(codes, vec![0, 0]);
}
