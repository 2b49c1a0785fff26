//! Representative requests for the consumer-group APIs: one member per group, so every
//! join completes at once (the initial rebalance delay defaults to 0).

use anyhow::Context;
use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::*;

use crate::common::requests::topic_name;
use crate::common::{ensure, str, Client};

/// Committed by [`commit`] on the matrix topic, partition 0.
const COMMITTED: i64 = 2;

fn group(name: &str) -> GroupId {
    GroupId(str(name))
}

/// A member that has joined and synced `group_id` (at fixed, modern versions).
pub struct Member {
    pub member_id: String,
    pub generation_id: i32,
}

fn join_request(group_id: &str, member_id: &str, v: i16) -> JoinGroupRequest {
    let mut req = JoinGroupRequest::default()
        .with_group_id(group(group_id))
        .with_session_timeout_ms(10_000)
        .with_member_id(str(member_id))
        .with_protocol_type(str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(str("range"))
            .with_metadata(Bytes::from_static(b"subscription"))]);
    if v >= 1 {
        req = req.with_rebalance_timeout_ms(10_000);
    }
    req
}

/// Join at `v`, answering MEMBER_ID_REQUIRED (v4+) by joining again with the given id.
async fn join_at(c: &mut Client, group_id: &str, v: i16) -> anyhow::Result<JoinGroupResponse> {
    let resp = c.try_send(v, join_request(group_id, "", v)).await?;
    if resp.error_code == 79 && v >= 4 {
        ensure(!resp.member_id.is_empty(), || "MEMBER_ID_REQUIRED without a member id".into())?;
        return c.try_send(v, join_request(group_id, &resp.member_id, v)).await.context("second join");
    }
    Ok(resp)
}

pub async fn joined(c: &mut Client, group_id: &str) -> anyhow::Result<Member> {
    let join = join_at(c, group_id, 7).await.context("join v7")?;
    ensure(join.error_code == 0, || format!("join error {}", join.error_code))?;
    let member_id = join.member_id.to_string();
    let sync = SyncGroupRequest::default()
        .with_group_id(group(group_id))
        .with_generation_id(join.generation_id)
        .with_member_id(str(&member_id))
        .with_protocol_type(Some(str("consumer")))
        .with_protocol_name(Some(str("range")))
        .with_assignments(vec![sync_group_request::SyncGroupRequestAssignment::default()
            .with_member_id(str(&member_id))
            .with_assignment(Bytes::from_static(b"assignment"))]);
    let resp = c.try_send(5, sync).await.context("sync v5")?;
    ensure(resp.error_code == 0, || format!("sync error {}", resp.error_code))?;
    Ok(Member { member_id, generation_id: join.generation_id })
}

/// Commit offset [`COMMITTED`] for `group_id` as a simple (memberless) consumer, at `v`.
async fn commit(c: &mut Client, group_id: &str, topic: &str, v: i16) -> anyhow::Result<OffsetCommitResponse> {
    use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
    let mut req = OffsetCommitRequest::default()
        .with_group_id(group(group_id))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(str(""))
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(topic_name(topic)).with_partitions(vec![
            OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(COMMITTED)
                .with_committed_metadata(Some(str("meta"))),
        ])]);
    if (2..=4).contains(&v) {
        req = req.with_retention_time_ms(-1);
    }
    c.try_send(v, req).await
}

async fn committed_ok(c: &mut Client, group_id: &str, topic: &str) -> anyhow::Result<()> {
    let resp = commit(c, group_id, topic, 8).await.context("commit v8")?;
    let code = resp.topics[0].partitions[0].error_code;
    ensure(code == 0, || format!("commit error {code}"))
}

pub async fn find_coordinator(c: &mut Client, port: i32, v: i16) -> anyhow::Result<()> {
    let mut req = FindCoordinatorRequest::default();
    req = if v >= 4 { req.with_coordinator_keys(vec![str("g-find")]) } else { req.with_key(str("g-find")) };
    let resp = c.try_send(v, req).await?;
    let (error, node, p) = if v >= 4 {
        let k = resp.coordinators.first().context("no coordinators")?;
        ensure(k.key.as_str() == "g-find", || format!("key {:?}", k.key))?;
        (k.error_code, k.node_id.0, k.port)
    } else {
        (resp.error_code, resp.node_id.0, resp.port)
    };
    ensure(error == 0 && node == 1 && p == port, || format!("error {error}, node {node}, port {p}"))
}

pub async fn join_group(c: &mut Client, v: i16) -> anyhow::Result<()> {
    let resp = join_at(c, &format!("g-join-v{v}"), v).await?;
    ensure(resp.error_code == 0, || format!("error {}", resp.error_code))?;
    ensure(!resp.member_id.is_empty() && resp.leader == resp.member_id, || {
        format!("member {:?} leader {:?}", resp.member_id, resp.leader)
    })?;
    ensure(resp.generation_id >= 1, || format!("generation {}", resp.generation_id))?;
    ensure(resp.members.len() == 1, || format!("{} members for the leader", resp.members.len()))?;
    ensure(resp.members[0].metadata.as_ref() == b"subscription", || "member metadata".into())?;
    if v >= 7 {
        ensure(resp.protocol_name.as_deref() == Some("range"), || format!("protocol {:?}", resp.protocol_name))?;
    }
    Ok(())
}

pub async fn sync_group(c: &mut Client, v: i16) -> anyhow::Result<()> {
    let group_id = format!("g-sync-v{v}");
    let join = join_at(c, &group_id, 7).await?;
    ensure(join.error_code == 0, || format!("join error {}", join.error_code))?;
    let mut req = SyncGroupRequest::default()
        .with_group_id(group(&group_id))
        .with_generation_id(join.generation_id)
        .with_member_id(join.member_id.clone())
        .with_assignments(vec![sync_group_request::SyncGroupRequestAssignment::default()
            .with_member_id(join.member_id.clone())
            .with_assignment(Bytes::from_static(b"assignment"))]);
    if v >= 5 {
        req = req.with_protocol_type(Some(str("consumer"))).with_protocol_name(Some(str("range")));
    }
    let resp = c.try_send(v, req).await?;
    ensure(resp.error_code == 0, || format!("error {}", resp.error_code))?;
    ensure(resp.assignment.as_ref() == b"assignment", || format!("assignment {:?}", resp.assignment))
}

pub async fn heartbeat(c: &mut Client, v: i16) -> anyhow::Result<()> {
    let group_id = format!("g-hb-v{v}");
    let m = joined(c, &group_id).await?;
    let req = HeartbeatRequest::default()
        .with_group_id(group(&group_id))
        .with_generation_id(m.generation_id)
        .with_member_id(str(&m.member_id));
    let resp = c.try_send(v, req.clone()).await?;
    ensure(resp.error_code == 0, || format!("error {}", resp.error_code))?;
    let stale = c.try_send(v, req.with_generation_id(m.generation_id + 10)).await.context("stale generation")?;
    ensure(stale.error_code == 22, || format!("wrong generation: error {} != ILLEGAL_GENERATION", stale.error_code))
}

pub async fn leave_group(c: &mut Client, v: i16) -> anyhow::Result<()> {
    use kafka_protocol::messages::leave_group_request::MemberIdentity;
    let group_id = format!("g-leave-v{v}");
    let m = joined(c, &group_id).await?;
    let req = if v >= 3 {
        LeaveGroupRequest::default()
            .with_group_id(group(&group_id))
            .with_members(vec![MemberIdentity::default().with_member_id(str(&m.member_id))])
    } else {
        LeaveGroupRequest::default().with_group_id(group(&group_id)).with_member_id(str(&m.member_id))
    };
    let resp = c.try_send(v, req).await?;
    ensure(resp.error_code == 0, || format!("error {}", resp.error_code))?;
    if v >= 3 {
        ensure(resp.members.len() == 1 && resp.members[0].error_code == 0, || format!("members {:?}", resp.members))?;
    }
    Ok(())
}

pub async fn offset_commit(c: &mut Client, topic: &str, v: i16) -> anyhow::Result<()> {
    let group_id = format!("g-commit-v{v}");
    let resp = commit(c, &group_id, topic, v).await?;
    let p = &resp.topics[0].partitions[0];
    ensure(p.error_code == 0, || format!("error {}", p.error_code))?;
    let missing = commit(c, &group_id, "no-such-topic", v).await.context("commit to a missing topic")?;
    let code = missing.topics[0].partitions[0].error_code;
    ensure(code == 3, || format!("missing topic: error {code}"))?;
    fetch_committed(c, &group_id, topic, 8).await
}

async fn fetch_committed(c: &mut Client, group_id: &str, topic: &str, v: i16) -> anyhow::Result<()> {
    use kafka_protocol::messages::offset_fetch_request::{
        OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
    };
    let req = if v >= 8 {
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(group(group_id))
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(topic_name(topic))
                .with_partition_indexes(vec![0])]))])
    } else {
        OffsetFetchRequest::default().with_group_id(group(group_id)).with_topics(Some(vec![
            OffsetFetchRequestTopic::default().with_name(topic_name(topic)).with_partition_indexes(vec![0]),
        ]))
    };
    let resp = c.try_send(v, req).await?;
    let (error, offset, metadata) = if v >= 8 {
        let g = resp.groups.first().context("no groups")?;
        let p = &g.topics.first().context("no topics")?.partitions[0];
        (g.error_code.max(p.error_code), p.committed_offset, p.metadata.clone())
    } else {
        let p = &resp.topics.first().context("no topics")?.partitions[0];
        (resp.error_code.max(p.error_code), p.committed_offset, p.metadata.clone())
    };
    ensure(error == 0, || format!("error {error}"))?;
    ensure(offset == COMMITTED, || format!("committed offset {offset}"))?;
    ensure(metadata.as_deref() == Some("meta"), || format!("metadata {metadata:?}"))
}

pub async fn offset_fetch(c: &mut Client, topic: &str, v: i16) -> anyhow::Result<()> {
    let group_id = format!("g-fetch-v{v}");
    committed_ok(c, &group_id, topic).await?;
    fetch_committed(c, &group_id, topic, v).await
}

pub async fn describe_groups(c: &mut Client, v: i16) -> anyhow::Result<()> {
    let group_id = format!("g-describe-v{v}");
    let m = joined(c, &group_id).await?;
    let resp = c.try_send(v, DescribeGroupsRequest::default().with_groups(vec![group(&group_id)])).await?;
    let g = resp.groups.first().context("no groups")?;
    ensure(g.error_code == 0, || format!("error {}", g.error_code))?;
    ensure(g.group_state.as_str() == "Stable", || format!("state {:?}", g.group_state))?;
    ensure(g.protocol_type.as_str() == "consumer" && g.protocol_data.as_str() == "range", || {
        format!("protocol {:?}/{:?}", g.protocol_type, g.protocol_data)
    })?;
    ensure(g.members.len() == 1 && g.members[0].member_id.as_str() == m.member_id, || {
        format!("members {:?}", g.members)
    })?;
    ensure(g.members[0].member_assignment.as_ref() == b"assignment", || "member assignment".into())
}

pub async fn list_groups(c: &mut Client, v: i16) -> anyhow::Result<()> {
    let group_id = format!("g-list-v{v}");
    joined(c, &group_id).await?;
    let resp = c.try_send(v, ListGroupsRequest::default()).await?;
    ensure(resp.error_code == 0, || format!("error {}", resp.error_code))?;
    let g = resp.groups.iter().find(|g| g.group_id.0.as_str() == group_id);
    ensure(g.is_some_and(|g| g.protocol_type.as_str() == "consumer"), || format!("{group_id} in {:?}", resp.groups))?;
    if v >= 4 {
        ensure(g.is_some_and(|g| g.group_state.as_str() == "Stable"), || format!("state of {g:?}"))?;
        let filtered = c
            .try_send(v, ListGroupsRequest::default().with_states_filter(vec![str("Dead")]))
            .await
            .context("states filter")?;
        ensure(filtered.groups.iter().all(|g| g.group_id.0.as_str() != group_id), || "states filter ignored".into())?;
    }
    Ok(())
}

pub async fn delete_groups(c: &mut Client, topic: &str, v: i16) -> anyhow::Result<()> {
    let empty = format!("g-delete-v{v}");
    committed_ok(c, &empty, topic).await?;
    let busy = format!("g-delete-busy-v{v}");
    joined(c, &busy).await?;
    let resp = c
        .try_send(
            v,
            DeleteGroupsRequest::default().with_groups_names(vec![group(&empty), group(&busy), group("g-never")]),
        )
        .await?;
    let codes: Vec<(String, i16)> = resp.results.iter().map(|r| (r.group_id.0.to_string(), r.error_code)).collect();
    // NONE, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND.
    let want = vec![(empty, 0), (busy, 68), ("g-never".to_owned(), 69)];
    ensure(codes == want, || format!("results {codes:?}, expected {want:?}"))
}

pub async fn offset_delete(c: &mut Client, topic: &str, v: i16) -> anyhow::Result<()> {
    use kafka_protocol::messages::offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
    let group_id = format!("g-offset-delete-v{v}");
    committed_ok(c, &group_id, topic).await?;
    let req = OffsetDeleteRequest::default().with_group_id(group(&group_id)).with_topics(vec![
        OffsetDeleteRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![OffsetDeleteRequestPartition::default().with_partition_index(0)]),
    ]);
    let resp = c.try_send(v, req).await?;
    ensure(resp.error_code == 0, || format!("error {}", resp.error_code))?;
    let code = resp.topics[0].partitions[0].error_code;
    ensure(code == 0, || format!("partition error {code}"))
}
