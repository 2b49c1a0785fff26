//! Committed offsets: OffsetCommit, OffsetFetch (single and multi-group), OffsetDelete.

use bytes::Buf;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use kafka_protocol::messages::offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;

use super::str_bytes;
use crate::coordinator::group::Group;
use crate::coordinator::offsets::{MemberRef, OffsetCommit};
use crate::coordinator::{CoordinatorError, GroupError};
use crate::protocol::errors::{coordinator_error, group_error};
use crate::protocol::Ctx;

/// Unknown topics and partitions are the request's problem (Kafka answers them in
/// KafkaApis, before the coordinator); everything else is the coordinator's decision.
pub async fn offset_commit(ctx: &Ctx, req: OffsetCommitRequest, _version: i16) -> OffsetCommitResponse {
    let image = ctx.image();
    // Per partition: its own error, or its index among the partitions handed on.
    let mut verdicts: Vec<(usize, i32, Result<usize, ResponseError>)> = Vec::new();
    let mut to_commit = Vec::new();
    for (ti, t) in req.topics.iter().enumerate() {
        let topic = image.topic(t.name.0.as_str());
        for p in &t.partitions {
            let exists =
                topic.is_some_and(|tp| p.partition_index >= 0 && (p.partition_index as usize) < tp.partitions.len());
            let verdict = if exists {
                to_commit.push(OffsetCommit {
                    topic: t.name.0.to_string(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: p.committed_metadata.as_ref().map(|m| m.to_string()).unwrap_or_default(),
                });
                Ok(to_commit.len() - 1)
            } else {
                Err(ResponseError::UnknownTopicOrPartition)
            };
            verdicts.push((ti, p.partition_index, verdict));
        }
    }
    let results = if to_commit.is_empty() {
        Ok(vec![])
    } else {
        let member = MemberRef {
            member_id: req.member_id.as_str(),
            generation_id: req.generation_id_or_member_epoch,
            group_instance_id: req.group_instance_id.as_ref().map(|s| s.as_str()),
        };
        ctx.groups.commit_offsets(req.group_id.0.as_str(), member, to_commit, ctx.now_ms()).await
    };
    let code = |verdict: &Result<usize, ResponseError>| match (verdict, &results) {
        (Err(e), _) => e.code(),
        (Ok(_), Err(e)) => coordinator_error(*e).code(),
        (Ok(i), Ok(rs)) => rs.get(*i).and_then(|r| r.err()).map_or(0, |e| coordinator_error(e).code()),
    };
    let topics = req
        .topics
        .iter()
        .enumerate()
        .map(|(ti, t)| {
            let parts = verdicts
                .iter()
                .filter(|(i, _, _)| *i == ti)
                .map(|(_, p, v)| {
                    OffsetCommitResponsePartition::default().with_partition_index(*p).with_error_code(code(v))
                })
                .collect();
            OffsetCommitResponseTopic::default().with_name(t.name.clone()).with_partitions(parts)
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

type FetchedOffsets = Vec<(String, Vec<(i32, i64, i32, String)>)>;

/// Committed offsets of one group, grouped by topic: (partition, offset, epoch, metadata);
/// `Err` when this broker does not serve the group's partition (yet).
fn fetch_group(ctx: &Ctx, group: &str, topics: Option<Vec<(String, Vec<i32>)>>) -> Result<FetchedOffsets, GroupError> {
    let wanted: Option<Vec<(String, i32)>> =
        topics.as_ref().map(|ts| ts.iter().flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p))).collect());
    let found = ctx.groups.fetch_offsets(group, wanted.as_deref())?;
    let mut out: FetchedOffsets = Vec::new();
    for (t, p, o) in found {
        let entry = match o {
            Some(o) => (p, o.offset, o.leader_epoch, o.metadata),
            None => (p, -1, -1, String::new()),
        };
        match out.iter_mut().find(|(name, _)| *name == t) {
            Some((_, v)) => v.push(entry),
            None => out.push((t, vec![entry])),
        }
    }
    Ok(out)
}

pub fn offset_fetch(ctx: &Ctx, req: OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
    if version < 8 {
        let topics =
            req.topics.clone().map(|ts| ts.into_iter().map(|t| (t.name.0.to_string(), t.partition_indexes)).collect());
        let fetched = match fetch_group(ctx, req.group_id.0.as_str(), topics) {
            Ok(f) => f,
            Err(e) => return unserved_v0_to_v7(req, group_error(e).code(), version),
        };
        let topics = fetched
            .into_iter()
            .map(|(t, ps)| {
                OffsetFetchResponseTopic::default().with_name(TopicName(str_bytes(t))).with_partitions(
                    ps.into_iter()
                        .map(|(p, off, epoch, meta)| {
                            let r = OffsetFetchResponsePartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(off)
                                .with_metadata(Some(str_bytes(meta)));
                            if version >= 5 {
                                r.with_committed_leader_epoch(epoch)
                            } else {
                                r
                            }
                        })
                        .collect(),
                )
            })
            .collect();
        return OffsetFetchResponse::default().with_topics(topics);
    }
    let groups = req
        .groups
        .into_iter()
        .map(|g| {
            let topics =
                g.topics.map(|ts| ts.into_iter().map(|t| (t.name.0.to_string(), t.partition_indexes)).collect());
            let fetched = match fetch_group(ctx, g.group_id.0.as_str(), topics) {
                Ok(f) => f,
                Err(e) => {
                    return OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id)
                        .with_error_code(group_error(e).code())
                }
            };
            OffsetFetchResponseGroup::default().with_group_id(g.group_id).with_topics(
                fetched
                    .into_iter()
                    .map(|(t, ps)| {
                        OffsetFetchResponseTopics::default().with_name(TopicName(str_bytes(t))).with_partitions(
                            ps.into_iter()
                                .map(|(p, off, epoch, meta)| {
                                    OffsetFetchResponsePartitions::default()
                                        .with_partition_index(p)
                                        .with_committed_offset(off)
                                        .with_committed_leader_epoch(epoch)
                                        .with_metadata(Some(str_bytes(meta)))
                                })
                                .collect(),
                        )
                    })
                    .collect(),
            )
        })
        .collect();
    OffsetFetchResponse::default().with_groups(groups)
}

/// OffsetFetch v0-v7 of a group this broker does not serve: v0 and v1 have no top-level
/// error, so it goes on each partition.
fn unserved_v0_to_v7(req: OffsetFetchRequest, code: i16, version: i16) -> OffsetFetchResponse {
    OffsetFetchResponse::default().with_error_code(if version >= 2 { code } else { 0 }).with_topics(
        req.topics
            .unwrap_or_default()
            .into_iter()
            .map(|t| {
                OffsetFetchResponseTopic::default().with_name(t.name).with_partitions(
                    t.partition_indexes
                        .into_iter()
                        .map(|p| {
                            OffsetFetchResponsePartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(-1)
                                .with_error_code(code)
                        })
                        .collect(),
                )
            })
            .collect(),
    )
}

/// Does any member of a consumer group subscribe to `topic`? Read from the members'
/// ConsumerProtocolSubscription metadata; unreadable metadata counts as subscribed.
fn subscribed(group: &Group, topic: &str) -> bool {
    if group.protocol_type.as_deref() != Some("consumer") {
        return false;
    }
    let protocol = group.protocol_name.clone().unwrap_or_default();
    group.members.values().any(|m| {
        let mut meta = m.metadata_for(&protocol);
        if meta.len() < 2 {
            return true;
        }
        let version = meta.get_i16();
        match ConsumerProtocolSubscription::decode(&mut meta, version.clamp(0, 3)) {
            Ok(sub) => sub.topics.iter().any(|t| t.as_str() == topic),
            Err(_) => true,
        }
    })
}

pub async fn offset_delete(ctx: &Ctx, req: OffsetDeleteRequest, _version: i16) -> OffsetDeleteResponse {
    let partitions: Vec<(String, i32)> = req
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.name.0.to_string(), p.partition_index)))
        .collect();
    match ctx.groups.delete_offsets(req.group_id.0.as_str(), &partitions, subscribed, ctx.now_ms()).await {
        Err(e) => OffsetDeleteResponse::default().with_error_code(coordinator_error(e).code()),
        Ok(results) => {
            let mut i = 0;
            let topics = req
                .topics
                .into_iter()
                .map(|t| {
                    let parts = t
                        .partitions
                        .iter()
                        .map(|p| {
                            let code = match &results[i] {
                                Ok(()) => 0,
                                Err(CoordinatorError::GroupSubscribedToTopic) => {
                                    ResponseError::GroupSubscribedToTopic.code()
                                }
                                Err(e) => coordinator_error(*e).code(),
                            };
                            i += 1;
                            OffsetDeleteResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect();
                    OffsetDeleteResponseTopic::default().with_name(t.name).with_partitions(parts)
                })
                .collect();
            OffsetDeleteResponse::default().with_topics(topics)
        }
    }
}
