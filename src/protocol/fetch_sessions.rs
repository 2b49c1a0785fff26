//! KIP-227 incremental fetch sessions, as Kafka's `FetchSession.scala` keeps them.
//!
//! A consumer that fetches the same partitions again and again need not name them all in
//! every request. Its first Fetch (session id 0, epoch 0) is a full one; the broker caches
//! the partitions it asked for and answers with a session id. Each later request names the
//! session and its epoch, and carries only the partitions whose fetch position changed
//! (added or altered) and those it stops fetching (`forgotten_topics_data`). The answer
//! holds only the partitions with something to say: records, an error, a new high
//! watermark, last stable offset or log start offset, a preferred read replica, a
//! diverging epoch.
//!
//! Followers fetch in sessions too (`replica_client/session.rs` is their side).
//!
//! The request's session fields, as Kafka reads them:
//! * id 0, epoch -1: a full fetch without a session.
//! * id 0, epoch 0: a full fetch that opens a session (the answer's id is 0 when the cache
//!   declines).
//! * id N, epoch -1 or 0: closes session N; then as with id 0.
//! * id N, epoch E > 0: an incremental fetch; FETCH_SESSION_ID_NOT_FOUND when N is not
//!   cached, INVALID_FETCH_SESSION_EPOCH when E is not the epoch the session expects,
//!   FETCH_SESSION_TOPIC_ID_ERROR when the session and the request disagree on whether
//!   topics are named by id (Fetch v13+).
//!
//! Invariants: a session's epoch is the one its next request must carry (1 after the full
//! fetch that opened it, then +1 per incremental fetch, skipping 0 and -1 on wrap); at most
//! `slots` sessions are cached, each bounded by the partitions its requests named (and a
//! request is bounded by `socket_request_max_bytes`). The cache is sans-I/O: the caller
//! passes the time, and the handler does the reads.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use indexmap::IndexMap;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::TopicName;
use uuid::Uuid;

/// Epoch of a full fetch that asks for a session.
pub const INITIAL_EPOCH: i32 = 0;
/// Epoch of a full fetch that wants no session (and closes the one it names).
pub const FINAL_EPOCH: i32 = -1;
/// A session unused this long may be evicted by any new one (Kafka's
/// MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS); younger sessions only by a more valuable
/// one (below).
pub const EVICTION_MS: i64 = 120_000;

/// How a request names a topic: by id from Fetch v13, by name before.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TopicKey {
    Id(Uuid),
    Name(TopicName),
}

pub type SessionPartition = (TopicKey, i32);

impl TopicKey {
    pub fn of(topic: &FetchTopic, uses_topic_ids: bool) -> TopicKey {
        if uses_topic_ids {
            TopicKey::Id(topic.topic_id)
        } else {
            TopicKey::Name(topic.topic.clone())
        }
    }

    fn of_forgotten(topic: &ForgottenTopic, uses_topic_ids: bool) -> TopicKey {
        if uses_topic_ids {
            TopicKey::Id(topic.topic_id)
        } else {
            TopicKey::Name(topic.topic.clone())
        }
    }
}

/// What the last answer told the client about a partition; `None` in a [`Cached`] means
/// the next answer must include it (it never was sent, or it was sent with an error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
}

/// One partition of an answer, as the session judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// The offsets sent; `None` for a partition answered with an error.
    pub sent: Option<Sent>,
    pub has_records: bool,
    /// A preferred read replica (KIP-392) or a diverging epoch: always worth sending.
    pub redirect: bool,
}

impl Outcome {
    fn must_send(&self, last: Option<Sent>) -> bool {
        self.has_records || self.redirect || self.sent.is_none() || self.sent != last
    }
}

#[derive(Debug)]
struct Cached {
    /// The fetch position as the client last sent it.
    position: FetchPartition,
    last: Option<Sent>,
}

#[derive(Debug)]
struct Session {
    epoch: i32,
    /// A follower broker's session: it may evict young consumer sessions.
    privileged: bool,
    uses_topic_ids: bool,
    created_ms: i64,
    last_used_ms: i64,
    /// In fetch order: a partition that returned records moves to the end, so a response
    /// limit does not starve the partitions behind it.
    partitions: IndexMap<SessionPartition, Cached>,
}

impl Session {
    /// Kafka's EvictableKey: unprivileged before privileged, then fewer partitions, then id.
    fn value(&self, id: i32) -> (bool, usize, i32) {
        (self.privileged, self.partitions.len(), id)
    }
}

/// What to do with one Fetch request.
#[derive(Debug)]
pub enum FetchContext {
    /// Read what the request names; answer with session id 0.
    Sessionless,
    /// Read what the request names; then offer the answer to [`FetchSessions::open`].
    Full,
    /// Read every partition of the session (listed here in its order, with the positions
    /// the client gave); answer with the partitions [`FetchSessions::judge`] keeps.
    Incremental { session_id: i32, topics: Vec<FetchTopic> },
    /// Answer with this top-level error, session id 0 and no partitions.
    Error(ResponseError),
}

/// The cached sessions of one broker (Kafka's FetchSessionCache).
#[derive(Debug)]
pub struct FetchSessions {
    /// Kafka's max.incremental.fetch.session.cache.slots; 0 turns sessions off.
    slots: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    sessions: HashMap<i32, Session>,
    /// Sessions evicted to make room for another, for `/metrics`.
    evictions: u64,
    /// Incremental fetches answered, for `/metrics`: counted by `judge`, once the answer
    /// is read, so a long poll that returns records written while it waited is counted
    /// after them.
    incremental: u64,
}

/// Counts for `/metrics` (Kafka's NumIncrementalFetchSessions,
/// NumIncrementalFetchPartitionsCached, IncrementalFetchSessionEvictionsPerSec; and the
/// incremental fetches served, which show that clients use their sessions).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionStats {
    pub sessions: usize,
    pub partitions: usize,
    pub evictions: u64,
    pub incremental_fetches: u64,
}

/// The epoch after `epoch` (1 after the largest int: 0 and -1 mean full fetches).
pub fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl FetchSessions {
    pub fn new(slots: usize) -> FetchSessions {
        FetchSessions { slots, inner: Mutex::new(Inner::default()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Every update below leaves the map consistent before it can panic.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn stats(&self) -> SessionStats {
        let inner = self.lock();
        SessionStats {
            sessions: inner.sessions.len(),
            partitions: inner.sessions.values().map(|s| s.partitions.len()).sum(),
            evictions: inner.evictions,
            incremental_fetches: inner.incremental,
        }
    }

    /// Drops every session, as a broker restart would (tests of the clients' recovery).
    #[cfg(test)]
    pub fn forget_all(&self) {
        self.lock().sessions.clear();
    }

    /// Reads a request's session fields (Kafka's FetchManager.newContext). For an
    /// incremental fetch this applies the request's added, altered and forgotten
    /// partitions to the session and moves it to its next epoch.
    pub fn begin(
        &self,
        session_id: i32,
        epoch: i32,
        uses_topic_ids: bool,
        topics: &[FetchTopic],
        forgotten: &[ForgottenTopic],
        now_ms: i64,
    ) -> FetchContext {
        let mut inner = self.lock();
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            if session_id != 0 {
                inner.sessions.remove(&session_id);
            }
            return if epoch == FINAL_EPOCH { FetchContext::Sessionless } else { FetchContext::Full };
        }
        let Some(session) = inner.sessions.get_mut(&session_id) else {
            return FetchContext::Error(ResponseError::FetchSessionIdNotFound);
        };
        if session.epoch != epoch {
            return FetchContext::Error(ResponseError::InvalidFetchSessionEpoch);
        }
        if session.uses_topic_ids != uses_topic_ids {
            return FetchContext::Error(ResponseError::FetchSessionTopicIdError);
        }
        for t in topics {
            let topic = TopicKey::of(t, uses_topic_ids);
            for p in &t.partitions {
                match session.partitions.get_mut(&(topic.clone(), p.partition)) {
                    Some(c) => c.position = p.clone(),
                    None => {
                        session
                            .partitions
                            .insert((topic.clone(), p.partition), Cached { position: p.clone(), last: None });
                    }
                }
            }
        }
        let forget: HashSet<SessionPartition> = forgotten
            .iter()
            .flat_map(|t| {
                let topic = TopicKey::of_forgotten(t, uses_topic_ids);
                t.partitions.iter().map(move |p| (topic.clone(), *p))
            })
            .collect();
        if !forget.is_empty() {
            // One pass, order kept (removing one at a time would move the rest each time).
            session.partitions.retain(|k, _| !forget.contains(k));
        }
        if session.partitions.is_empty() {
            inner.sessions.remove(&session_id);
            return FetchContext::Sessionless;
        }
        session.epoch = next_epoch(session.epoch);
        session.last_used_ms = now_ms;
        let topics = request_topics(&session.partitions);
        FetchContext::Incremental { session_id, topics }
    }

    /// After a full fetch: cache its partitions as a new session if there is room, or if
    /// an evictable session is worth less (Kafka's tryEvict). Returns the session id to
    /// answer with, 0 for none.
    pub fn open(
        &self,
        privileged: bool,
        uses_topic_ids: bool,
        partitions: Vec<(SessionPartition, FetchPartition, Outcome)>,
        now_ms: i64,
    ) -> i32 {
        if self.slots == 0 {
            return 0;
        }
        let mut inner = self.lock();
        if inner.sessions.len() >= self.slots {
            let Some(victim) = evictable(&inner.sessions, privileged, partitions.len(), now_ms) else {
                return 0;
            };
            inner.sessions.remove(&victim);
            inner.evictions += 1;
        }
        let id = loop {
            // A random positive id (uuid's random bits: no second source of randomness).
            let id = (Uuid::new_v4().as_u128() as i32) & i32::MAX;
            if id != 0 && !inner.sessions.contains_key(&id) {
                break id;
            }
        };
        let partitions = partitions
            .into_iter()
            .map(|(key, position, outcome)| (key, Cached { position, last: outcome.sent }))
            .collect();
        let session = Session {
            epoch: next_epoch(INITIAL_EPOCH),
            privileged,
            uses_topic_ids,
            created_ms: now_ms,
            last_used_ms: now_ms,
            partitions,
        };
        inner.sessions.insert(id, session);
        id
    }

    /// After an incremental fetch: which partitions the answer keeps (one flag per entry
    /// of `outcomes`, in the order the session listed them), remembering what they tell
    /// the client. A session evicted in the meantime keeps them all.
    pub fn judge(&self, session_id: i32, outcomes: &[(SessionPartition, Outcome)]) -> Vec<bool> {
        let mut inner = self.lock();
        inner.incremental += 1;
        let Some(session) = inner.sessions.get_mut(&session_id) else {
            return vec![true; outcomes.len()];
        };
        let mut keep = Vec::with_capacity(outcomes.len());
        let mut to_end = HashSet::new();
        for (key, outcome) in outcomes {
            let Some(cached) = session.partitions.get_mut(key) else {
                keep.push(true);
                continue;
            };
            keep.push(outcome.must_send(cached.last));
            cached.last = outcome.sent;
            if outcome.has_records {
                to_end.insert(key);
            }
        }
        if !to_end.is_empty() {
            // One pass: the rest in their order, then those that returned records.
            let (moved, rest): (Vec<_>, Vec<_>) =
                std::mem::take(&mut session.partitions).into_iter().partition(|(k, _)| to_end.contains(k));
            session.partitions = rest.into_iter().chain(moved).collect();
        }
        keep
    }
}

/// The session to evict for a new one of `size` partitions, if any (Kafka's tryEvict):
/// the least recently used one when it is stale; else the least valuable one that the
/// newcomer outranks and may evict (a privileged newcomer: any unprivileged session or a
/// privileged one older than [`EVICTION_MS`]; an unprivileged one: only sessions older
/// than that).
fn evictable(sessions: &HashMap<i32, Session>, privileged: bool, size: usize, now_ms: i64) -> Option<i32> {
    let (lru_id, lru) = sessions.iter().min_by_key(|(id, s)| (s.last_used_ms, **id))?;
    if now_ms - lru.last_used_ms > EVICTION_MS {
        return Some(*lru_id);
    }
    let old = |s: &Session| now_ms - s.created_ms > EVICTION_MS;
    let (id, least) =
        sessions.iter().filter(|(_, s)| old(s) || (privileged && !s.privileged)).min_by_key(|(id, s)| s.value(**id))?;
    // The newcomer's id is not known yet; Kafka compares with id 0, below every real one.
    ((privileged, size, 0) > least.value(*id)).then_some(*id)
}

/// The session's partitions as the topics of a Fetch request, in the session's order.
fn request_topics(partitions: &IndexMap<SessionPartition, Cached>) -> Vec<FetchTopic> {
    fetch_topics(partitions.iter().map(|((topic, _), cached)| (topic.clone(), &cached.position)))
}

/// Fetch positions as the topics of a Fetch request, in order: consecutive partitions of
/// one topic share an entry (the broker's session and the follower's side both build
/// requests this way).
pub fn fetch_topics<'a>(partitions: impl Iterator<Item = (TopicKey, &'a FetchPartition)>) -> Vec<FetchTopic> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for (topic, position) in partitions {
        let same = topics.last().is_some_and(|t| match &topic {
            TopicKey::Id(id) => t.topic_id == *id,
            TopicKey::Name(name) => t.topic == *name,
        });
        if !same {
            let t = match topic {
                TopicKey::Id(id) => FetchTopic::default().with_topic_id(id),
                TopicKey::Name(name) => FetchTopic::default().with_topic(name),
            };
            topics.push(t);
        }
        topics.last_mut().expect("pushed above").partitions.push(position.clone());
    }
    topics
}

#[cfg(test)]
#[path = "fetch_sessions_tests.rs"]
mod tests;
