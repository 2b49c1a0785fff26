//! HTTP consumers as members of classic consumer groups.
//!
//! An HTTP consumer is named by the client (`consumer_id`, unique within its group) and
//! is a real member of the group coordinator: JoinGroup/SyncGroup with protocol type
//! "consumer" and protocol "range", its subscription and assignment in the consumer
//! protocol's encoding, so Java and librdkafka members of the same group read them and
//! `kafka-consumer-groups --describe` lists it. A task per member ([`super::member_task`])
//! does what a Kafka consumer's background thread does: heartbeats, rejoins when the
//! group rebalances (transparently: a poll sees the new assignment), computes the range
//! assignment when the coordinator makes it the leader, and leaves the group once no
//! poll (or join) came for the session timeout.
//!
//! Each member keeps its fetch positions per assigned partition, as a Kafka consumer
//! does: a poll without `offset` goes on from where the previous one ended, or starts at
//! the committed offset (else the log start) after the partition was (re)assigned.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use super::error::ApiError;
use crate::protocol::consumer_protocol::Assignment;
use crate::protocol::Ctx;

/// What a request sees of a member.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub member_id: String,
    /// -1 until the first join completes.
    pub generation_id: i32,
    pub assignment: Assignment,
    /// Why the member left the group, once it has.
    pub ended: Option<ApiError>,
}

struct MemberState {
    member_id: String,
    generation_id: i32,
    assignment: Assignment,
    positions: HashMap<(String, i32), i64>,
    last_seen: Instant,
    ended: Option<ApiError>,
}

pub struct HttpMember {
    pub group: String,
    pub consumer_id: String,
    pub topics: Vec<String>,
    pub session_timeout_ms: i32,
    /// `/ip` of the HTTP client that joined, for DescribeGroups.
    pub client_host: String,
    state: Mutex<MemberState>,
    /// Bumped on every change of generation and when the member ends.
    changed: watch::Sender<u64>,
}

impl HttpMember {
    fn lock(&self) -> MutexGuard<'_, MemberState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A poll, join or commit: the client is alive.
    pub fn touch(&self) {
        self.lock().last_seen = Instant::now();
    }

    pub fn idle_since(&self) -> Instant {
        self.lock().last_seen
    }

    pub fn snapshot(&self) -> Snapshot {
        let s = self.lock();
        Snapshot {
            member_id: s.member_id.clone(),
            generation_id: s.generation_id,
            assignment: s.assignment.clone(),
            ended: s.ended.clone(),
        }
    }

    pub fn member_id(&self) -> String {
        self.lock().member_id.clone()
    }

    pub fn set_member_id(&self, id: &str) {
        self.lock().member_id = id.to_owned();
    }

    /// A completed join: the new generation and assignment. Positions stay only for
    /// partitions held before and after (a partition that moved away and back may have
    /// been consumed and committed by another member meanwhile).
    pub fn install(&self, generation_id: i32, assignment: Assignment) {
        let mut s = self.lock();
        let kept = |t: &str, p: i32, a: &Assignment| a.get(t).is_some_and(|ps| ps.contains(&p));
        let old = std::mem::take(&mut s.assignment);
        s.positions.retain(|(t, p), _| kept(t, *p, &old) && kept(t, *p, &assignment));
        s.assignment = assignment;
        s.generation_id = generation_id;
        drop(s);
        self.changed.send_modify(|v| *v += 1);
    }

    /// The member is out of the group for good.
    pub fn end(&self, why: ApiError) {
        self.lock().ended = Some(why);
        self.changed.send_modify(|v| *v += 1);
    }

    pub fn position(&self, topic: &str, partition: i32) -> Option<i64> {
        self.lock().positions.get(&(topic.to_owned(), partition)).copied()
    }

    /// After a poll read in `generation_id`: where the next poll starts. Ignored when the
    /// group rebalanced meanwhile.
    pub fn advance(&self, generation_id: i32, positions: Vec<((String, i32), i64)>) {
        let mut s = self.lock();
        if s.generation_id == generation_id {
            s.positions.extend(positions);
        }
    }

    /// Waits until the first join completed or the member ended, at most `limit`.
    pub async fn joined(&self, limit: std::time::Duration) -> Snapshot {
        let mut rx = self.changed.subscribe();
        let _ = tokio::time::timeout(limit, async {
            loop {
                let s = self.snapshot();
                if s.generation_id >= 0 || s.ended.is_some() {
                    return;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        self.snapshot()
    }
}

/// HTTP members a broker holds at most: each is a task and a group member.
pub const MAX_MEMBERS: usize = 10_000;

/// Every HTTP member of this broker, by (group, consumer id).
pub struct Members {
    by_id: Mutex<HashMap<(String, String), Arc<HttpMember>>>,
    shutdown: Mutex<broadcast::Receiver<()>>,
}

/// What a join asks for.
pub struct JoinRequest {
    pub group: String,
    pub consumer_id: String,
    pub topics: Vec<String>,
    pub session_timeout_ms: i32,
    pub client_host: String,
}

impl Members {
    pub fn new(shutdown: broadcast::Receiver<()>) -> Members {
        Members { by_id: Mutex::default(), shutdown: Mutex::new(shutdown) }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<(String, String), Arc<HttpMember>>> {
        self.by_id.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, group: &str, consumer_id: &str) -> Option<Arc<HttpMember>> {
        self.lock().get(&(group.to_owned(), consumer_id.to_owned())).cloned()
    }

    /// The member `req` names, started (its task spawned) if it is new; 400 when a member
    /// of that id exists with another subscription, 503 when the broker holds
    /// [`MAX_MEMBERS`] already.
    pub fn join(self: &Arc<Self>, ctx: &Arc<Ctx>, req: JoinRequest) -> Result<Arc<HttpMember>, ApiError> {
        let key = (req.group.clone(), req.consumer_id.clone());
        let mut by_id = self.lock();
        if let Some(m) = by_id.get(&key) {
            if m.topics != req.topics {
                return Err(ApiError::bad("topics", "this consumer_id is a member with other topics; use another id"));
            }
            m.touch();
            return Ok(m.clone());
        }
        if by_id.len() >= MAX_MEMBERS {
            let msg = format!("this broker holds {MAX_MEMBERS} HTTP members already");
            return Err(ApiError::new(axum::http::StatusCode::SERVICE_UNAVAILABLE, "too_many_members", None, msg));
        }
        let member = Arc::new(HttpMember {
            group: req.group,
            consumer_id: req.consumer_id,
            topics: req.topics,
            session_timeout_ms: req.session_timeout_ms,
            client_host: req.client_host,
            state: Mutex::new(MemberState {
                member_id: String::new(),
                generation_id: -1,
                assignment: Assignment::new(),
                positions: HashMap::new(),
                last_seen: Instant::now(),
                ended: None,
            }),
            changed: watch::channel(0).0,
        });
        by_id.insert(key, member.clone());
        drop(by_id);
        let shutdown = self.shutdown.lock().unwrap_or_else(|p| p.into_inner()).resubscribe();
        let (ctx, members, m) = (ctx.clone(), self.clone(), member.clone());
        tokio::spawn(async move {
            super::member_task::run(&ctx, &m, shutdown).await;
            members.remove(&m);
        });
        Ok(member)
    }

    fn remove(&self, member: &Arc<HttpMember>) {
        let mut by_id = self.lock();
        let key = (member.group.clone(), member.consumer_id.clone());
        if by_id.get(&key).is_some_and(|m| Arc::ptr_eq(m, member)) {
            by_id.remove(&key);
        }
    }
}
