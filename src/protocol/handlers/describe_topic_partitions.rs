//! DescribeTopicPartitions (KIP-966; Kafka 4's `kafka-topics --describe` path): topics in
//! name order with their partitions, paged by a cursor, as Kafka's
//! `DescribeTopicPartitionsRequestHandler` and `getTopicMetadataForDescribeTopicResponse`:
//!
//! * no topics named: every topic from the cursor's on; named topics: those from the
//!   cursor's on, and the cursor's topic must be among them (else INVALID_REQUEST);
//! * at most `min(response_partition_limit, 2000)` partitions per answer; the answer's
//!   cursor names the first partition left out (or, when the budget ran out exactly at a
//!   topic's end, the next topic at partition 0); no cursor means nothing is left;
//! * a named topic that does not exist is listed with UNKNOWN_TOPIC_OR_PARTITION (or
//!   INVALID_TOPIC_EXCEPTION for an illegal name); with no topics named it is skipped.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName};

use super::{str_bytes, topic_ops_all};
use crate::controller::partition_change::NO_LEADER;
use crate::controller::{MetadataImage, TopicImage};
use crate::protocol::Ctx;

/// Kafka's `max.request.partition.size.limit` default.
pub const MAX_REQUEST_PARTITION_SIZE_LIMIT: i32 = 2000;

pub fn handle(ctx: &Ctx, req: DescribeTopicPartitionsRequest, _version: i16) -> DescribeTopicPartitionsResponse {
    describe(&ctx.image(), &req)
}

fn describe(image: &MetadataImage, req: &DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse {
    let cursor = req.cursor.as_ref().map(|c| (c.topic_name.0.as_str(), c.partition_index));
    if cursor.is_some_and(|(_, p)| p < 0) {
        return refuse(req, ResponseError::InvalidRequest);
    }
    let cursor_topic = cursor.map_or("", |(t, _)| t);
    let fetch_all = req.topics.is_empty();
    let names: BTreeSet<&str> = if fetch_all {
        image.topics.keys().map(String::as_str).filter(|n| *n >= cursor_topic).collect()
    } else {
        req.topics.iter().map(|t| t.name.0.as_str()).filter(|n| *n >= cursor_topic).collect()
    };
    if !fetch_all && cursor.is_some() && !names.contains(cursor_topic) {
        return refuse(req, ResponseError::InvalidRequest);
    }
    let mut remaining =
        usize::try_from(req.response_partition_limit.min(MAX_REQUEST_PARTITION_SIZE_LIMIT)).unwrap_or(0);
    let mut topics = Vec::new();
    let mut next_cursor = None;
    for name in names {
        if remaining == 0 {
            next_cursor = Some(Cursor::default().with_topic_name(TopicName(str_bytes(name))).with_partition_index(0));
            break;
        }
        let Some(topic) = image.topic(name) else {
            if !fetch_all {
                let error = match crate::controller::validate_topic_name(name) {
                    Ok(()) => ResponseError::UnknownTopicOrPartition,
                    Err(_) => ResponseError::InvalidTopicException,
                };
                topics.push(
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_error_code(error.code())
                        .with_name(Some(TopicName(str_bytes(name))))
                        .with_is_internal(name.starts_with("__"))
                        .with_topic_authorized_operations(topic_ops_all()),
                );
            }
            continue;
        };
        let first = match cursor {
            Some((t, p)) if t == name => usize::try_from(p).unwrap_or(0),
            _ => 0,
        };
        let page: Vec<_> = topic.partitions.iter().skip(first).take(remaining).collect();
        let next = first + page.len();
        remaining -= page.len();
        topics.push(describe_topic(image, topic, &page));
        if next < topic.partitions.len() {
            next_cursor =
                Some(Cursor::default().with_topic_name(TopicName(str_bytes(name))).with_partition_index(next as i32));
            break;
        }
    }
    DescribeTopicPartitionsResponse::default().with_topics(topics).with_next_cursor(next_cursor)
}

fn describe_topic(
    image: &MetadataImage,
    topic: &TopicImage,
    page: &[&crate::controller::PartitionImage],
) -> DescribeTopicPartitionsResponseTopic {
    let partitions = page
        .iter()
        .map(|p| {
            let leader_known = p.leader != NO_LEADER && image.broker_alive(p.leader);
            let error = if leader_known { 0 } else { ResponseError::LeaderNotAvailable.code() };
            DescribeTopicPartitionsResponsePartition::default()
                .with_error_code(error)
                .with_partition_index(p.partition)
                .with_leader_id(BrokerId(if leader_known { p.leader } else { NO_LEADER }))
                .with_leader_epoch(p.leader_epoch)
                .with_replica_nodes(p.replicas.iter().map(|r| BrokerId(*r)).collect())
                .with_isr_nodes(p.isr.iter().map(|r| BrokerId(*r)).collect())
                // KIP-966's eligible leader replicas and last known leader, as Kafka 4.1+
                // sends them (empty lists when none; the Java admin client reads them as
                // non-null, and `kafka-topics --describe` prints them as Elr/LastKnownElr).
                .with_eligible_leader_replicas(Some(p.elr.iter().map(|r| BrokerId(*r)).collect()))
                .with_last_known_elr(Some(p.last_known_elr.iter().map(|r| BrokerId(*r)).collect()))
                .with_offline_replicas(
                    p.replicas.iter().filter(|r| !image.broker_alive(**r)).map(|r| BrokerId(*r)).collect(),
                )
        })
        .collect();
    DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(TopicName(str_bytes(topic.name.clone()))))
        .with_topic_id(topic.topic_id)
        .with_is_internal(topic.is_internal())
        .with_partitions(partitions)
        .with_topic_authorized_operations(topic_ops_all())
}

/// The whole request refused: every named topic with the error (Kafka's
/// `DescribeTopicPartitionsRequest.getErrorResponse`).
fn refuse(req: &DescribeTopicPartitionsRequest, error: ResponseError) -> DescribeTopicPartitionsResponse {
    let topics = req
        .topics
        .iter()
        .map(|t| {
            DescribeTopicPartitionsResponseTopic::default()
                .with_error_code(error.code())
                .with_name(Some(t.name.clone()))
                .with_topic_authorized_operations(topic_ops_all())
        })
        .collect();
    DescribeTopicPartitionsResponse::default().with_topics(topics)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kafka_protocol::messages::describe_topic_partitions_request::{Cursor as ReqCursor, TopicRequest};
    use uuid::Uuid;

    use super::*;
    use crate::controller::{BrokerImage, PartitionImage};

    fn image(topics: &[(&str, i32)]) -> MetadataImage {
        let mut img = MetadataImage::default();
        img.brokers.insert(
            1,
            BrokerImage {
                node_id: 1,
                host: "h".into(),
                port: 9092,
                rack: None,
                fenced: false,
                inter_broker: None,
                incarnation: None,
                metadata_format: crate::controller::records::METADATA_FORMAT,
            },
        );
        for (i, (name, n)) in topics.iter().enumerate() {
            let id = Uuid::from_u128(i as u128 + 1);
            let partitions = (0..*n)
                .map(|p| PartitionImage {
                    partition: p,
                    replicas: vec![1, 2],
                    isr: vec![1],
                    leader: if p == 1 { NO_LEADER } else { 1 },
                    leader_epoch: 0,
                    partition_epoch: 0,
                    adding_replicas: vec![],
                    removing_replicas: vec![],
                    elr: Vec::new(),
                    last_known_elr: Vec::new(),
                })
                .collect();
            img.topic_names_by_id.insert(id, name.to_string());
            img.topics.insert(
                name.to_string(),
                Arc::new(TopicImage { name: name.to_string(), topic_id: id, partitions, configs: Default::default() }),
            );
        }
        img
    }

    fn request(topics: &[&str], limit: i32, cursor: Option<(&str, i32)>) -> DescribeTopicPartitionsRequest {
        DescribeTopicPartitionsRequest::default()
            .with_topics(topics.iter().map(|t| TopicRequest::default().with_name(TopicName(str_bytes(*t)))).collect())
            .with_response_partition_limit(limit)
            .with_cursor(
                cursor.map(|(t, p)| {
                    ReqCursor::default().with_topic_name(TopicName(str_bytes(t))).with_partition_index(p)
                }),
            )
    }

    /// (topic, error, partitions listed).
    type Listed = Vec<(String, i16, Vec<i32>)>;

    /// What was listed, and the next cursor.
    fn summary(r: &DescribeTopicPartitionsResponse) -> (Listed, Option<(String, i32)>) {
        let topics = r
            .topics
            .iter()
            .map(|t| {
                let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
                (name, t.error_code, t.partitions.iter().map(|p| p.partition_index).collect())
            })
            .collect();
        (topics, r.next_cursor.as_ref().map(|c| (c.topic_name.0.to_string(), c.partition_index)))
    }

    #[test]
    fn pages_through_every_topic_in_name_order() {
        let img = image(&[("b", 3), ("a", 2), ("c", 1)]);
        let first = describe(&img, &request(&[], 3, None));
        assert_eq!(
            summary(&first),
            (vec![("a".into(), 0, vec![0, 1]), ("b".into(), 0, vec![0])], Some(("b".into(), 1)))
        );
        let second = describe(&img, &request(&[], 2, Some(("b", 1))));
        assert_eq!(summary(&second), (vec![("b".into(), 0, vec![1, 2])], Some(("c".into(), 0))));
        let third = describe(&img, &request(&[], 2, Some(("c", 0))));
        assert_eq!(summary(&third), (vec![("c".into(), 0, vec![0])], None));
    }

    #[test]
    fn named_topics_missing_ones_and_bad_cursors() {
        let img = image(&[("a", 2)]);
        let r = describe(&img, &request(&["zz", "a", "bad name"], 10, None));
        assert_eq!(
            summary(&r).0,
            vec![("a".into(), 0, vec![0, 1]), ("bad name".into(), 17, vec![]), ("zz".into(), 3, vec![])]
        );
        // The cursor's topic must be among the named ones; a negative index is refused.
        let r = describe(&img, &request(&["a"], 10, Some(("b", 0))));
        assert_eq!(summary(&r).0, vec![("a".into(), 42, vec![])]);
        let r = describe(&img, &request(&["a"], 10, Some(("a", -1))));
        assert_eq!(summary(&r).0, vec![("a".into(), 42, vec![])]);
        // The limit is capped at Kafka's 2000.
        let big = image(&[("a", 2500)]);
        let r = describe(&big, &request(&[], i32::MAX, None));
        assert_eq!(r.topics[0].partitions.len(), 2000);
        assert_eq!(summary(&r).1, Some(("a".into(), 2000)));
    }

    #[test]
    fn partitions_without_a_leader_and_offline_replicas() {
        let img = image(&[("a", 2)]);
        let r = describe(&img, &request(&["a"], 10, None));
        let p = &r.topics[0].partitions;
        assert_eq!((p[0].error_code, p[0].leader_id.0), (0, 1));
        assert_eq!((p[1].error_code, p[1].leader_id.0), (ResponseError::LeaderNotAvailable.code(), -1));
        assert_eq!(p[0].offline_replicas, vec![BrokerId(2)], "broker 2 is not registered");
    }
}
