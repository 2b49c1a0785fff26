//! A Fetch under its KIP-227 session (`protocol/fetch_sessions.rs`), the same for
//! consumers (`fetch.rs`) and followers (`replica_fetch.rs`): the session decides what to
//! read (what the request names, or every partition of the session), the handler reads it
//! as an ordinary full request, and an incremental answer is then cut down to the
//! partitions with news. A handler's answer follows its request one for one (a topic per
//! requested topic, a partition per requested partition), which is what lines the answer
//! up with the session's partitions here.

use std::future::Future;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, FetchResponse};

use crate::protocol::fetch_encoding::FetchReply;
use crate::protocol::fetch_sessions::{FetchContext, Outcome, Sent, SessionPartition, TopicKey};
use crate::protocol::Ctx;

/// Answers `req` through its session; `serve` reads what it is given. `privileged`: a
/// follower's session (Kafka lets those evict young consumer sessions).
pub async fn in_session<F, Fut>(
    ctx: &Ctx,
    req: FetchRequest,
    version: i16,
    privileged: bool,
    client_id: &str,
    serve: F,
) -> FetchReply
where
    F: FnOnce(FetchRequest) -> Fut,
    Fut: Future<Output = FetchReply>,
{
    if version < 7 {
        return serve(req).await;
    }
    let uses_topic_ids = version >= 13;
    let sessions = &ctx.fetch_sessions;
    let (id, epoch) = (req.session_id, req.session_epoch);
    match sessions.begin(id, epoch, uses_topic_ids, &req.topics, &req.forgotten_topics_data, ctx.now_ms()) {
        FetchContext::Error(e) => {
            // Routine: after a broker restart or an eviction the client starts a new session.
            tracing::debug!(client = client_id, session = id, epoch, error = ?e, "fetch session refused");
            let response = FetchResponse::default().with_error_code(e.code()).with_session_id(0);
            FetchReply { response, records: Vec::new() }
        }
        FetchContext::Sessionless => with_session_id(serve(req).await, 0),
        FetchContext::Full => {
            let asked: Vec<(SessionPartition, FetchPartition)> = partitions(&req.topics, uses_topic_ids)
                .zip(req.topics.iter().flat_map(|t| t.partitions.iter().cloned()))
                .collect();
            let reply = serve(req).await;
            let rows = asked
                .into_iter()
                .zip(outcomes(&reply))
                .map(|((key, position), outcome)| (key, position, outcome))
                .collect();
            let session_id = sessions.open(privileged, uses_topic_ids, rows, ctx.now_ms());
            with_session_id(reply, session_id)
        }
        FetchContext::Incremental { session_id, topics } => {
            let keys: Vec<SessionPartition> = partitions(&topics, uses_topic_ids).collect();
            let mut whole = req;
            whole.topics = topics;
            whole.forgotten_topics_data.clear();
            let mut reply = serve(whole).await;
            let judged: Vec<(SessionPartition, Outcome)> = keys.into_iter().zip(outcomes(&reply)).collect();
            retain(&mut reply, &sessions.judge(session_id, &judged));
            with_session_id(reply, session_id)
        }
    }
}

fn with_session_id(mut reply: FetchReply, session_id: i32) -> FetchReply {
    reply.response.session_id = session_id;
    reply
}

/// The session key of every partition of `topics`, in order.
fn partitions(topics: &[FetchTopic], uses_topic_ids: bool) -> impl Iterator<Item = SessionPartition> + '_ {
    topics.iter().flat_map(move |t| {
        let topic = TopicKey::of(t, uses_topic_ids);
        t.partitions.iter().map(move |p| (topic.clone(), p.partition))
    })
}

/// Each partition of the answer as a fetch session judges it, in order.
fn outcomes(reply: &FetchReply) -> impl Iterator<Item = Outcome> + '_ {
    reply.response.responses.iter().zip(&reply.records).flat_map(|(topic, records)| {
        topic.partitions.iter().zip(records).map(|(p, records)| Outcome {
            sent: (p.error_code == 0).then_some(Sent {
                high_watermark: p.high_watermark,
                last_stable_offset: p.last_stable_offset,
                log_start_offset: p.log_start_offset,
            }),
            has_records: !records.is_empty(),
            redirect: p.preferred_read_replica.0 >= 0 || p.diverging_epoch.epoch >= 0,
        })
    })
}

/// Keeps the partitions flagged in `keep` (one flag per partition, in order) and the topics
/// left with any.
fn retain(reply: &mut FetchReply, keep: &[bool]) {
    let mut flags = keep.iter().copied();
    for (topic, records) in reply.response.responses.iter_mut().zip(reply.records.iter_mut()) {
        let kept: Vec<bool> = topic.partitions.iter().map(|_| flags.next().unwrap_or(true)).collect();
        retain_flagged(&mut topic.partitions, &kept);
        retain_flagged(records, &kept);
    }
    let non_empty: Vec<bool> = reply.response.responses.iter().map(|t| !t.partitions.is_empty()).collect();
    retain_flagged(&mut reply.response.responses, &non_empty);
    retain_flagged(&mut reply.records, &non_empty);
}

/// Keeps `items[i]` where `flags[i]` holds (`flags` is as long as `items`).
fn retain_flagged<T>(items: &mut Vec<T>, flags: &[bool]) {
    let mut flags = flags.iter();
    items.retain(|_| flags.next().copied().unwrap_or(true));
}
