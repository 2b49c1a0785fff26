use super::*;

fn partition(index: i32, offset: i64) -> FetchPartition {
    FetchPartition::default().with_partition(index).with_fetch_offset(offset).with_partition_max_bytes(1 << 20)
}

fn topic(id: Uuid, partitions: &[(i32, i64)]) -> FetchTopic {
    FetchTopic::default().with_topic_id(id).with_partitions(partitions.iter().map(|&(p, o)| partition(p, o)).collect())
}

fn forget(id: Uuid, partitions: &[i32]) -> ForgottenTopic {
    ForgottenTopic::default().with_topic_id(id).with_partitions(partitions.to_vec())
}

fn sent(hw: i64) -> Outcome {
    Outcome {
        sent: Some(Sent { high_watermark: hw, last_stable_offset: hw, log_start_offset: 0 }),
        has_records: false,
        redirect: false,
    }
}

fn with_records(hw: i64) -> Outcome {
    Outcome { has_records: true, ..sent(hw) }
}

const ERROR: Outcome = Outcome { sent: None, has_records: false, redirect: false };

fn key(id: Uuid, p: i32) -> SessionPartition {
    (TopicKey::Id(id), p)
}

/// Opens a session over `parts` of topic `t`, each answered with high watermark 10.
fn open(cache: &FetchSessions, t: Uuid, parts: &[i32], now: i64) -> i32 {
    let FetchContext::Full = cache.begin(0, INITIAL_EPOCH, true, &[], &[], now) else { panic!("not a full fetch") };
    let rows = parts.iter().map(|&p| (key(t, p), partition(p, 0), sent(10))).collect();
    cache.open(false, true, rows, now)
}

/// The (partition, fetch offset) pairs an incremental context will read.
fn listed(ctx: &FetchContext) -> Vec<(i32, i64)> {
    match ctx {
        FetchContext::Incremental { topics, .. } => {
            topics.iter().flat_map(|t| t.partitions.iter().map(|p| (p.partition, p.fetch_offset))).collect()
        }
        other => panic!("not incremental: {other:?}"),
    }
}

#[test]
fn a_full_fetch_opens_a_session_whose_epochs_count_up_from_one() {
    let cache = FetchSessions::new(10);
    let t = Uuid::new_v4();
    let id = open(&cache, t, &[0, 1], 0);
    assert!(id > 0);
    assert_eq!(listed(&cache.begin(id, 1, true, &[], &[], 1)), vec![(0, 0), (1, 0)]);
    assert_eq!(listed(&cache.begin(id, 2, true, &[], &[], 2)), vec![(0, 0), (1, 0)]);
    // Epoch 2 again (a retried request) is refused, and so is a skipped epoch.
    assert!(matches!(
        cache.begin(id, 2, true, &[], &[], 3),
        FetchContext::Error(ResponseError::InvalidFetchSessionEpoch)
    ));
    assert!(matches!(
        cache.begin(id, 4, true, &[], &[], 3),
        FetchContext::Error(ResponseError::InvalidFetchSessionEpoch)
    ));
    assert_eq!(listed(&cache.begin(id, 3, true, &[], &[], 3)), vec![(0, 0), (1, 0)]);
}

#[test]
fn unknown_sessions_and_mixed_topic_naming_are_refused() {
    let cache = FetchSessions::new(10);
    let t = Uuid::new_v4();
    assert!(matches!(
        cache.begin(77, 1, true, &[], &[], 0),
        FetchContext::Error(ResponseError::FetchSessionIdNotFound)
    ));
    // Kafka reads id 0 with an epoch above 0 as an incremental fetch of a session that
    // cannot exist.
    assert!(matches!(cache.begin(0, 5, true, &[], &[], 0), FetchContext::Error(ResponseError::FetchSessionIdNotFound)));
    let id = open(&cache, t, &[0], 0);
    assert!(matches!(
        cache.begin(id, 1, false, &[], &[], 0),
        FetchContext::Error(ResponseError::FetchSessionTopicIdError)
    ));
}

#[test]
fn a_full_fetch_naming_a_session_closes_it() {
    let cache = FetchSessions::new(10);
    let t = Uuid::new_v4();
    let a = open(&cache, t, &[0], 0);
    assert!(matches!(cache.begin(a, FINAL_EPOCH, true, &[], &[], 1), FetchContext::Sessionless));
    assert!(matches!(cache.begin(a, 1, true, &[], &[], 1), FetchContext::Error(ResponseError::FetchSessionIdNotFound)));
    let b = open(&cache, t, &[0], 2);
    assert!(matches!(cache.begin(b, INITIAL_EPOCH, true, &[], &[], 3), FetchContext::Full));
    assert_eq!(cache.stats().sessions, 0);
}

#[test]
fn added_altered_and_forgotten_partitions_change_the_session() {
    let cache = FetchSessions::new(10);
    let (t, u) = (Uuid::new_v4(), Uuid::new_v4());
    let id = open(&cache, t, &[0, 1, 2], 0);
    // Partition 1 moves to offset 5, topic u partition 0 joins, partition 2 leaves.
    let ctx = cache.begin(id, 1, true, &[topic(t, &[(1, 5)]), topic(u, &[(0, 3)])], &[forget(t, &[2])], 1);
    assert_eq!(listed(&ctx), vec![(0, 0), (1, 5), (0, 3)]);
    let FetchContext::Incremental { topics, .. } = ctx else { unreachable!() };
    assert_eq!(topics.iter().map(|t| t.topic_id).collect::<Vec<_>>(), vec![t, u]);
    // Counted once answered (a long poll is counted after the records it waited for).
    assert_eq!(cache.stats().incremental_fetches, 0);
    cache.judge(id, &[]);
    assert_eq!(cache.stats(), SessionStats { sessions: 1, partitions: 3, evictions: 0, incremental_fetches: 1 });
    // Forgetting every partition ends the session.
    let ctx = cache.begin(id, 2, true, &[], &[forget(t, &[0, 1]), forget(u, &[0])], 2);
    assert!(matches!(ctx, FetchContext::Sessionless));
    assert_eq!(cache.stats().sessions, 0);
}

#[test]
fn an_incremental_answer_keeps_only_partitions_with_news() {
    let cache = FetchSessions::new(10);
    let t = Uuid::new_v4();
    let id = open(&cache, t, &[0, 1, 2, 3], 0);
    let _ = cache.begin(id, 1, true, &[], &[], 1);
    // 0: nothing new; 1: records; 2: high watermark moved; 3: an error.
    let outcomes = [(key(t, 0), sent(10)), (key(t, 1), with_records(12)), (key(t, 2), sent(11)), (key(t, 3), ERROR)];
    assert_eq!(cache.judge(id, &outcomes), vec![false, true, true, true]);
    // The one with records went to the end of the order.
    assert_eq!(listed(&cache.begin(id, 2, true, &[], &[], 2)), vec![(0, 0), (2, 0), (3, 0), (1, 0)]);
    // Next time: 2 is unchanged now; 3 recovered, so it is sent although its offsets equal
    // what was sent before the error; a log start offset move and a redirect count too.
    let moved_start = Outcome { sent: Some(Sent { log_start_offset: 4, ..sent(10).sent.unwrap() }), ..sent(10) };
    let redirect = Outcome { redirect: true, ..sent(10) };
    let outcomes = [(key(t, 0), moved_start), (key(t, 2), sent(11)), (key(t, 3), sent(10)), (key(t, 1), redirect)];
    assert_eq!(cache.judge(id, &outcomes), vec![true, false, true, true]);
}

#[test]
fn a_partition_added_by_an_incremental_fetch_is_sent_the_first_time() {
    let cache = FetchSessions::new(10);
    let t = Uuid::new_v4();
    let id = open(&cache, t, &[0], 0);
    let _ = cache.begin(id, 1, true, &[topic(t, &[(1, 0)])], &[], 1);
    assert_eq!(cache.judge(id, &[(key(t, 0), sent(10)), (key(t, 1), sent(10))]), vec![false, true]);
}

#[test]
fn epochs_wrap_past_the_largest_int_to_one() {
    assert_eq!(next_epoch(i32::MAX), 1);
    assert_eq!(next_epoch(INITIAL_EPOCH), 1);
}

#[test]
fn no_slots_means_no_sessions() {
    let cache = FetchSessions::new(0);
    assert_eq!(open(&cache, Uuid::new_v4(), &[0], 0), 0);
}

#[test]
fn a_full_cache_evicts_only_stale_or_less_valuable_sessions() {
    let cache = FetchSessions::new(2);
    let t = Uuid::new_v4();
    let a = open(&cache, t, &[0], 0);
    let b = open(&cache, t, &[0, 1, 2], 10);
    // Both young: a newcomer, however large, waits.
    assert_eq!(open(&cache, t, &[0, 1, 2, 3], 20), 0);
    // Past the eviction time both are old; a newcomer smaller than both still loses...
    let now = 10 + EVICTION_MS + 1;
    let _ = cache.begin(a, 1, true, &[], &[], now - 5);
    let _ = cache.begin(b, 1, true, &[], &[], now - 5);
    let FetchContext::Full = cache.begin(0, INITIAL_EPOCH, true, &[], &[], now) else { unreachable!() };
    assert_eq!(cache.open(false, true, vec![], now), 0);
    // ...and a larger one evicts the least valuable (the one with fewer partitions).
    let c = open(&cache, t, &[0, 1], now);
    assert!(c > 0);
    assert!(matches!(
        cache.begin(a, 2, true, &[], &[], now),
        FetchContext::Error(ResponseError::FetchSessionIdNotFound)
    ));
    assert!(matches!(cache.begin(b, 2, true, &[], &[], now), FetchContext::Incremental { .. }));
    assert_eq!(cache.stats().evictions, 1);
    // A session unused for longer than the eviction time gives way to anyone.
    let later = now + EVICTION_MS + 1;
    let _ = cache.begin(b, 3, true, &[], &[], later);
    let d = open(&cache, t, &[0], later);
    assert!(d > 0);
    assert!(matches!(
        cache.begin(c, 1, true, &[], &[], later),
        FetchContext::Error(ResponseError::FetchSessionIdNotFound)
    ));
}

#[test]
fn a_follower_session_evicts_a_young_consumer_session() {
    let cache = FetchSessions::new(1);
    let t = Uuid::new_v4();
    let a = open(&cache, t, &[0, 1, 2], 0);
    let f = cache.open(true, true, vec![(key(t, 0), partition(0, 0), sent(1))], 1);
    assert!(f > 0);
    assert!(matches!(cache.begin(a, 1, true, &[], &[], 2), FetchContext::Error(ResponseError::FetchSessionIdNotFound)));
}
