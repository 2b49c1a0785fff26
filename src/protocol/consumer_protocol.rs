//! The consumer protocol inside a classic group's JoinGroup/SyncGroup bytes: a member's
//! subscription (`ConsumerProtocolSubscription`, the metadata of its protocol) and its
//! assignment (`ConsumerProtocolAssignment`, what the leader hands out in SyncGroup),
//! each an int16 version followed by the versioned body, as the Java client and
//! librdkafka write them; and the range assignor, which a broker-side member (the HTTP
//! API's) runs when the coordinator makes it the leader.
//!
//! The group coordinator treats these bytes as opaque; only members read them.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
use kafka_protocol::messages::{ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable};

use super::handlers::str_bytes;

/// The versions written: v0 is what every client reads.
const WRITE_VERSION: i16 = 0;

/// Topic → partitions, topics sorted.
pub type Assignment = BTreeMap<String, Vec<i32>>;

/// A subscription to `topics`, as the metadata of protocol "range".
pub fn encode_subscription(topics: &[String]) -> Bytes {
    let sub = ConsumerProtocolSubscription::default().with_topics(topics.iter().cloned().map(str_bytes).collect());
    let mut buf = BytesMut::new();
    buf.put_i16(WRITE_VERSION);
    // Encoding a v0 subscription of strings cannot fail.
    let _ = sub.encode(&mut buf, WRITE_VERSION);
    buf.freeze()
}

/// The topics of a member's subscription; `None` when the bytes are not one.
pub fn decode_subscription(mut meta: Bytes) -> Option<Vec<String>> {
    if meta.len() < 2 {
        return None;
    }
    let version = meta.get_i16();
    let sub = ConsumerProtocolSubscription::decode(&mut meta, version.clamp(0, 3)).ok()?;
    Some(sub.topics.iter().map(|t| t.to_string()).collect())
}

pub fn encode_assignment(assignment: &Assignment) -> Bytes {
    let parts = assignment
        .iter()
        .map(|(t, ps)| {
            TopicPartition::default().with_topic(TopicName(str_bytes(t.clone()))).with_partitions(ps.clone())
        })
        .collect();
    let a = ConsumerProtocolAssignment::default().with_assigned_partitions(parts);
    let mut buf = BytesMut::new();
    buf.put_i16(WRITE_VERSION);
    let _ = a.encode(&mut buf, WRITE_VERSION);
    buf.freeze()
}

/// A member's assignment from SyncGroup; empty bytes (no assignment) are an empty one,
/// `None` when the bytes are not an assignment.
pub fn decode_assignment(mut bytes: Bytes) -> Option<Assignment> {
    if bytes.is_empty() {
        return Some(Assignment::new());
    }
    if bytes.len() < 2 {
        return None;
    }
    let version = bytes.get_i16();
    let a = ConsumerProtocolAssignment::decode(&mut bytes, version.clamp(0, 3)).ok()?;
    let mut out = Assignment::new();
    for tp in a.assigned_partitions {
        out.entry(tp.topic.0.to_string()).or_default().extend(tp.partitions);
    }
    Some(out)
}

/// Kafka's RangeAssignor: per topic, the members subscribed to it in member-id order
/// each take a contiguous range of partitions; the first `partitions % members` take one
/// more. `partitions_of` gives a topic's partition count (`None`: unknown, not assigned).
/// Every member gets an entry, possibly empty.
pub fn range_assign(
    subscriptions: &BTreeMap<String, Vec<String>>,
    partitions_of: impl Fn(&str) -> Option<i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = subscriptions.keys().map(|m| (m.clone(), Assignment::new())).collect();
    let mut by_topic: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (member, topics) in subscriptions {
        for t in topics {
            let members = by_topic.entry(t.as_str()).or_default();
            if !members.contains(&member.as_str()) {
                members.push(member.as_str());
            }
        }
    }
    for (topic, mut members) in by_topic {
        let Some(n) = partitions_of(topic).filter(|n| *n > 0) else { continue };
        members.sort_unstable();
        let count = members.len() as i32;
        let (per, extra) = (n / count, n % count);
        let mut next = 0;
        for (i, m) in members.iter().enumerate() {
            let take = per + i32::from((i as i32) < extra);
            if take > 0 {
                out.get_mut(*m)
                    .expect("every member has an entry")
                    .insert(topic.to_owned(), (next..next + take).collect());
            }
            next += take;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_and_assignment_round_trip() {
        let topics = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(decode_subscription(encode_subscription(&topics)), Some(topics));
        let a: Assignment = [("a".to_owned(), vec![0, 2]), ("b".to_owned(), vec![1])].into();
        assert_eq!(decode_assignment(encode_assignment(&a)), Some(a));
        assert_eq!(decode_assignment(Bytes::new()), Some(Assignment::new()));
        assert_eq!(decode_subscription(Bytes::from_static(&[0])), None);
        assert_eq!(decode_assignment(Bytes::from_static(&[0, 0, 0, 0, 0, 9])), None);
    }

    #[test]
    fn range_gives_contiguous_ranges_and_the_remainder_to_the_first_members() {
        let subs: BTreeMap<String, Vec<String>> = [
            ("m2".to_owned(), vec!["t".to_owned()]),
            ("m1".to_owned(), vec!["t".to_owned(), "u".to_owned()]),
            ("m3".to_owned(), vec!["t".to_owned(), "gone".to_owned()]),
        ]
        .into();
        let out = range_assign(&subs, |t| match t {
            "t" => Some(7),
            "u" => Some(2),
            _ => None,
        });
        assert_eq!(out["m1"]["t"], vec![0, 1, 2]);
        assert_eq!(out["m2"]["t"], vec![3, 4]);
        assert_eq!(out["m3"]["t"], vec![5, 6]);
        assert_eq!(out["m1"]["u"], vec![0, 1]);
        assert!(!out["m3"].contains_key("gone"));
        // More members than partitions: the last ones get nothing, but an entry.
        let subs: BTreeMap<String, Vec<String>> =
            [("a".to_owned(), vec!["u".to_owned()]), ("b".to_owned(), vec!["u".to_owned()])].into();
        let out = range_assign(&subs, |_| Some(1));
        assert_eq!(out["a"]["u"], vec![0]);
        assert!(out["b"].is_empty());
    }
}
