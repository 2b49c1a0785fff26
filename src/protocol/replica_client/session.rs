//! The follower's side of a KIP-227 fetch session (Kafka's `FetchSessionHandler`): the
//! first Fetch names every partition and asks for a session; each later one names only the
//! partitions whose fetch position changed or that joined, and forgets those no longer
//! fetched. The leader answers only the partitions with news; a partition it leaves out
//! has nothing new (no records, the same high watermark and log start offset).
//!
//! Invariant: `open` is what the leader's session holds after the last answered request.
//! [`SessionHandler::prepare`] takes it out and only [`SessionHandler::complete`] with a
//! clean answer puts it back, so a request that failed, timed out or was dropped in flight
//! leaves no session: the next request is a full one, which also closes the old session
//! on the leader (its id with epoch 0).

use indexmap::IndexMap;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use uuid::Uuid;

use crate::protocol::fetch_sessions::{fetch_topics, next_epoch, TopicKey, INITIAL_EPOCH};

type Key = (Uuid, i32);

#[derive(Debug, Default)]
pub struct SessionHandler {
    open: Option<Open>,
    /// A session the leader may still hold that the next full request closes.
    to_close: i32,
}

#[derive(Debug)]
struct Open {
    id: i32,
    epoch: i32,
    /// The positions the leader's session holds, in the order it reads them.
    sent: IndexMap<Key, FetchPartition>,
}

/// One request's session fields, topics and forgotten topics, and what it means for the
/// session once answered.
#[derive(Debug)]
pub struct Prepared {
    pub session_id: i32,
    pub epoch: i32,
    pub topics: Vec<FetchTopic>,
    pub forgotten: Vec<ForgottenTopic>,
    wanted: IndexMap<Key, FetchPartition>,
}

impl SessionHandler {
    /// The request for `wanted` (topic id, position), in order.
    pub fn prepare(&mut self, wanted: Vec<(Uuid, FetchPartition)>) -> Prepared {
        let wanted: IndexMap<Key, FetchPartition> = wanted.into_iter().map(|(t, p)| ((t, p.partition), p)).collect();
        match self.open.take() {
            None => Prepared {
                session_id: std::mem::take(&mut self.to_close),
                epoch: INITIAL_EPOCH,
                topics: group(wanted.iter()),
                forgotten: Vec::new(),
                wanted,
            },
            Some(open) => {
                // Until this request is answered the leader's session is in doubt.
                self.to_close = open.id;
                let changed = wanted.iter().filter(|(k, p)| open.sent.get(*k) != Some(*p));
                let mut forgotten: Vec<ForgottenTopic> = Vec::new();
                for (topic, partition) in open.sent.keys().filter(|k| !wanted.contains_key(*k)) {
                    match forgotten.last_mut() {
                        Some(f) if f.topic_id == *topic => f.partitions.push(*partition),
                        _ => forgotten
                            .push(ForgottenTopic::default().with_topic_id(*topic).with_partitions(vec![*partition])),
                    }
                }
                Prepared { session_id: open.id, epoch: open.epoch, topics: group(changed), forgotten, wanted }
            }
        }
    }

    /// After a clean answer (`error_code` 0) with `session_id`: the session as the leader now
    /// holds it. Any other answer leaves none.
    pub fn complete(&mut self, prepared: Prepared, error_code: i16, session_id: i32) {
        if error_code != 0 {
            return;
        }
        self.to_close = 0;
        let full = prepared.epoch == INITIAL_EPOCH;
        if full && session_id == 0 {
            return; // the leader declined: the next request is full again
        }
        let epoch = if full { next_epoch(INITIAL_EPOCH) } else { next_epoch(prepared.epoch) };
        // An incremental answer keeps the session whose id the request named.
        let id = if full { session_id } else { prepared.session_id };
        self.open = Some(Open { id, epoch, sent: prepared.wanted });
    }

    /// Whether the next request will be a full one.
    #[cfg(test)]
    pub fn is_full_next(&self) -> bool {
        self.open.is_none()
    }
}

/// Positions by topic id as the topics of a Fetch request.
fn group<'a>(partitions: impl Iterator<Item = (&'a Key, &'a FetchPartition)>) -> Vec<FetchTopic> {
    fetch_topics(partitions.map(|((topic, _), p)| (TopicKey::Id(*topic), p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(partition: i32, offset: i64) -> FetchPartition {
        FetchPartition::default().with_partition(partition).with_fetch_offset(offset)
    }

    fn named(topics: &[FetchTopic]) -> Vec<(i32, i64)> {
        topics.iter().flat_map(|t| t.partitions.iter().map(|p| (p.partition, p.fetch_offset))).collect()
    }

    #[test]
    fn full_then_only_changes_then_full_again_after_a_failure() {
        let t = Uuid::from_u128(7);
        let mut h = SessionHandler::default();
        let p = h.prepare(vec![(t, at(0, 0)), (t, at(1, 0))]);
        assert_eq!((p.session_id, p.epoch, named(&p.topics)), (0, 0, vec![(0, 0), (1, 0)]));
        h.complete(p, 0, 42);
        // Nothing moved: an empty request in session 42 at epoch 1.
        let p = h.prepare(vec![(t, at(0, 0)), (t, at(1, 0))]);
        assert_eq!((p.session_id, p.epoch, named(&p.topics), p.forgotten.len()), (42, 1, vec![], 0));
        h.complete(p, 0, 42);
        // Partition 1 moved, partition 0 left, partition 2 joined.
        let p = h.prepare(vec![(t, at(1, 5)), (t, at(2, 0))]);
        assert_eq!((p.session_id, p.epoch, named(&p.topics)), (42, 2, vec![(1, 5), (2, 0)]));
        assert_eq!(p.forgotten.iter().map(|f| f.partitions.clone()).collect::<Vec<_>>(), vec![vec![0]]);
        // That request is never answered (the connection dropped): the next is full and
        // closes session 42.
        drop(p);
        assert!(h.is_full_next());
        let p = h.prepare(vec![(t, at(1, 5))]);
        assert_eq!((p.session_id, p.epoch, named(&p.topics)), (42, 0, vec![(1, 5)]));
        h.complete(p, 0, 43);
        // A session error answer ends the session too.
        let p = h.prepare(vec![(t, at(1, 6))]);
        assert_eq!((p.session_id, p.epoch), (43, 1));
        h.complete(p, 70, 0);
        let p = h.prepare(vec![(t, at(1, 6))]);
        assert_eq!((p.session_id, p.epoch), (43, 0));
        // A leader that declines to open one: full requests from then on, closing nothing.
        h.complete(p, 0, 0);
        let p = h.prepare(vec![(t, at(1, 6))]);
        assert_eq!((p.session_id, p.epoch), (0, 0));
    }
}
