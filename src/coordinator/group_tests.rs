//! State-machine tests: feed events with a hand-moved clock, assert the effects.

use bytes::Bytes;

use super::*;

const SESSION: i32 = 10_000;
const REBALANCE: i32 = 30_000;

fn params(member_id: &str, protocols: &[&str]) -> JoinParams {
    JoinParams {
        member_id: member_id.to_owned(),
        group_instance_id: None,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: SESSION,
        rebalance_timeout_ms: REBALANCE,
        protocol_type: "consumer".into(),
        protocols: protocols.iter().map(|p| (p.to_string(), Bytes::from(format!("meta-{p}")))).collect(),
        require_known_member_id: true,
    }
}

fn join_outcomes(fx: &[Effect]) -> Vec<(Token, JoinOutcome)> {
    fx.iter().filter_map(|e| if let Effect::Join(t, o) = e { Some((*t, o.clone())) } else { None }).collect()
}

fn sync_outcomes(fx: &[Effect]) -> Vec<(Token, SyncOutcome)> {
    fx.iter().filter_map(|e| if let Effect::Sync(t, o) = e { Some((*t, o.clone())) } else { None }).collect()
}

/// Join with the v4 two-step dance; returns the member id (the join stays parked).
fn first_join(g: &mut Group, now: i64, token: Token, name: &str) -> (String, Vec<Effect>) {
    let fx = g.join(now, token, params("", &["range"]), || format!("{name}-id"));
    let out = join_outcomes(&fx);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1.error, Some(GroupError::MemberIdRequired));
    let id = out[0].1.member_id.clone();
    let fx = g.join(now, token + 100, params(&id, &["range"]), || unreachable!());
    (id, fx)
}

fn stable_group_of_two(now: i64) -> (Group, String, String) {
    let mut g = Group::new("g", GroupLimits::default(), now);
    let (a, fx) = first_join(&mut g, now, 1, "a");
    // A new group's first rebalance completes on the next clock tick, generation 1.
    assert!(join_outcomes(&fx).is_empty());
    let fx = g.tick(now);
    let out = join_outcomes(&fx);
    assert_eq!(out[0].1.generation_id, 1);
    assert_eq!(out[0].1.leader, a);
    g.sync(
        now,
        2,
        SyncParams {
            member_id: &a,
            generation_id: 1,
            group_instance_id: None,
            protocol_type: None,
            protocol_name: None,
            assignments: vec![(a.clone(), Bytes::from_static(b"all"))],
        },
    );
    assert_eq!(g.state, GroupState::Stable);
    // b joins: a must rejoin.
    let (b, fx) = first_join(&mut g, now, 3, "b");
    assert!(join_outcomes(&fx).is_empty(), "b waits for a to rejoin");
    assert_eq!(g.state, GroupState::PreparingRebalance);
    assert_eq!(g.heartbeat(now, &a, 1, None), Err(GroupError::RebalanceInProgress));
    let fx = g.join(now, 4, params(&a, &["range"]), || unreachable!());
    let out = join_outcomes(&fx);
    assert_eq!(out.len(), 2);
    for (_, o) in &out {
        assert_eq!(o.generation_id, 2);
        assert_eq!(o.leader, a);
        assert_eq!(o.protocol_name.as_deref(), Some("range"));
    }
    let leader = out.iter().find(|(_, o)| o.member_id == a).unwrap();
    assert_eq!(leader.1.members.len(), 2);
    let follower = out.iter().find(|(_, o)| o.member_id == b).unwrap();
    assert!(follower.1.members.is_empty());
    assert_eq!(g.state, GroupState::CompletingRebalance);
    // follower syncs first and waits; the leader's sync releases both.
    let fx = g.sync(
        now,
        5,
        SyncParams {
            member_id: &b,
            generation_id: 2,
            group_instance_id: None,
            protocol_type: None,
            protocol_name: None,
            assignments: vec![],
        },
    );
    assert!(sync_outcomes(&fx).is_empty());
    let fx = g.sync(
        now,
        6,
        SyncParams {
            member_id: &a,
            generation_id: 2,
            group_instance_id: None,
            protocol_type: Some("consumer"),
            protocol_name: Some("range"),
            assignments: vec![(a.clone(), Bytes::from_static(b"A")), (b.clone(), Bytes::from_static(b"B"))],
        },
    );
    let out = sync_outcomes(&fx);
    assert_eq!(out.len(), 2);
    assert!(out.contains(&(
        5,
        SyncOutcome {
            error: None,
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            assignment: Bytes::from_static(b"B")
        }
    )));
    assert!(fx.contains(&Effect::PersistGroup));
    assert_eq!(g.state, GroupState::Stable);
    (g, a, b)
}

#[test]
fn two_members_join_sync_and_get_their_assignments() {
    let (mut g, a, b) = stable_group_of_two(0);
    assert_eq!(g.heartbeat(1, &a, 2, None), Ok(()));
    assert_eq!(g.heartbeat(1, &b, 1, None), Err(GroupError::IllegalGeneration));
    assert_eq!(g.heartbeat(1, "stranger", 2, None), Err(GroupError::UnknownMemberId));
    // A follower re-syncing in Stable gets its assignment back at once.
    let fx = g.sync(
        2,
        9,
        SyncParams {
            member_id: &b,
            generation_id: 2,
            group_instance_id: None,
            protocol_type: None,
            protocol_name: None,
            assignments: vec![],
        },
    );
    assert_eq!(sync_outcomes(&fx)[0].1.assignment, Bytes::from_static(b"B"));
}

#[test]
fn a_silent_member_is_expired_and_the_rest_rebalance() {
    let (mut g, a, b) = stable_group_of_two(0);
    // a keeps heartbeating, b goes silent.
    for t in (1_000..SESSION as i64).step_by(1_000) {
        assert_eq!(g.heartbeat(t, &a, 2, None), Ok(()));
        assert!(g.tick(t).is_empty());
    }
    let fx = g.tick(SESSION as i64 + 1);
    assert!(join_outcomes(&fx).is_empty());
    assert!(!g.members.contains_key(&b));
    assert_eq!(g.state, GroupState::PreparingRebalance);
    let fx = g.join(SESSION as i64 + 2, 20, params(&a, &["range"]), || unreachable!());
    let out = join_outcomes(&fx);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1.generation_id, 3);
    assert_eq!(out[0].1.members.len(), 1);
}

#[test]
fn a_member_that_does_not_rejoin_in_time_is_dropped() {
    let (mut g, a, b) = stable_group_of_two(0);
    // a rejoins with a new protocol list: rebalance; b never rejoins (but heartbeats).
    let fx = g.join(10, 30, params(&a, &["range", "roundrobin"]), || unreachable!());
    assert!(join_outcomes(&fx).is_empty());
    // b keeps heartbeating (told to rejoin each time) but never does.
    for t in (20..REBALANCE as i64).step_by(1_000) {
        assert_eq!(g.heartbeat(t, &b, 2, None), Err(GroupError::RebalanceInProgress));
        assert!(join_outcomes(&g.tick(t)).is_empty());
    }
    let fx = g.tick(REBALANCE as i64 + 10);
    let out = join_outcomes(&fx);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 30);
    assert_eq!(out[0].1.generation_id, 3);
    assert!(!g.members.contains_key(&b));
}

#[test]
fn leaving_triggers_a_rebalance_and_the_last_leave_empties_the_group() {
    let (mut g, a, b) = stable_group_of_two(0);
    let (r, _) = g.leave(5, &b, None);
    assert_eq!(r, Ok(()));
    assert_eq!(g.state, GroupState::PreparingRebalance);
    let fx = g.join(6, 40, params(&a, &["range"]), || unreachable!());
    assert_eq!(join_outcomes(&fx)[0].1.generation_id, 3);
    g.sync(
        7,
        41,
        SyncParams {
            member_id: &a,
            generation_id: 3,
            group_instance_id: None,
            protocol_type: None,
            protocol_name: None,
            assignments: vec![],
        },
    );
    let (r, fx) = g.leave(8, &a, None);
    assert_eq!(r, Ok(()));
    assert_eq!(g.state, GroupState::Empty);
    assert!(fx.contains(&Effect::PersistGroup));
    assert_eq!(g.leave(9, &a, None).0, Err(GroupError::UnknownMemberId));
}

#[test]
fn the_leader_never_syncing_restarts_the_rebalance() {
    let mut g = Group::new("g", GroupLimits::default(), 0);
    let (a, _) = first_join(&mut g, 0, 1, "a");
    g.tick(0);
    assert_eq!(g.state, GroupState::CompletingRebalance);
    // a never sends SyncGroup and is removed after the rebalance timeout.
    let fx = g.tick(REBALANCE as i64 + 1);
    assert!(sync_outcomes(&fx).is_empty());
    assert!(!g.members.contains_key(&a));
    assert_eq!(g.state, GroupState::Empty);
}

#[test]
fn sync_and_commit_errors() {
    let (mut g, a, _b) = stable_group_of_two(0);
    let fx = g.sync(
        1,
        50,
        SyncParams {
            member_id: &a,
            generation_id: 1,
            group_instance_id: None,
            protocol_type: None,
            protocol_name: None,
            assignments: vec![],
        },
    );
    assert_eq!(sync_outcomes(&fx)[0].1.error, Some(GroupError::IllegalGeneration));
    let fx = g.sync(
        1,
        51,
        SyncParams {
            member_id: "nobody",
            generation_id: 2,
            group_instance_id: None,
            protocol_type: None,
            protocol_name: None,
            assignments: vec![],
        },
    );
    assert_eq!(sync_outcomes(&fx)[0].1.error, Some(GroupError::UnknownMemberId));
    let fx = g.sync(
        1,
        52,
        SyncParams {
            member_id: &a,
            generation_id: 2,
            group_instance_id: None,
            protocol_type: Some("connect"),
            protocol_name: None,
            assignments: vec![],
        },
    );
    assert_eq!(sync_outcomes(&fx)[0].1.error, Some(GroupError::InconsistentGroupProtocol));
}

#[test]
fn joins_with_bad_protocols_or_timeouts_are_refused() {
    let (mut g, _a, _b) = stable_group_of_two(0);
    let mut p = params("", &["range"]);
    p.protocol_type = "connect".into();
    let fx = g.join(1, 60, p, || "x".into());
    assert_eq!(join_outcomes(&fx)[0].1.error, Some(GroupError::InconsistentGroupProtocol));
    let fx = g.join(1, 61, params("", &["sticky"]), || "y".into());
    assert_eq!(join_outcomes(&fx)[0].1.error, Some(GroupError::InconsistentGroupProtocol));
    let mut p = params("", &["range"]);
    p.session_timeout_ms = 10;
    let fx = g.join(1, 62, p, || "z".into());
    assert_eq!(join_outcomes(&fx)[0].1.error, Some(GroupError::InvalidSessionTimeout));
    let fx = g.join(1, 63, params("made-up", &["range"]), || unreachable!());
    assert_eq!(join_outcomes(&fx)[0].1.error, Some(GroupError::UnknownMemberId));
}

#[test]
fn a_static_member_rejoining_fences_its_old_id_without_a_rebalance() {
    let mut g = Group::new("g", GroupLimits::default(), 0);
    let mut p = params("", &["range"]);
    p.group_instance_id = Some("inst-1".into());
    // Static members need no MEMBER_ID_REQUIRED round trip.
    let fx = g.join(0, 1, p.clone(), || "old".into());
    assert!(join_outcomes(&fx).is_empty());
    let fx = g.tick(0);
    assert_eq!(join_outcomes(&fx)[0].1.member_id, "old");
    g.sync(
        0,
        2,
        SyncParams {
            member_id: "old",
            generation_id: 1,
            group_instance_id: Some("inst-1"),
            protocol_type: None,
            protocol_name: None,
            assignments: vec![("old".into(), Bytes::from_static(b"x"))],
        },
    );
    assert_eq!(g.state, GroupState::Stable);
    // The same instance restarts and joins without its member id: same generation, no
    // rebalance, its old assignment back.
    let fx = g.join(5, 3, p.clone(), || "new".into());
    let out = join_outcomes(&fx);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1.member_id, "new");
    assert_eq!(out[0].1.generation_id, 1);
    assert!(out[0].1.skip_assignment, "the returning leader must not reassign");
    assert!(fx.contains(&Effect::PersistGroup));
    assert_eq!(g.state, GroupState::Stable);
    let fx = g.sync(
        6,
        4,
        SyncParams {
            member_id: "new",
            generation_id: 1,
            group_instance_id: Some("inst-1"),
            protocol_type: None,
            protocol_name: None,
            assignments: vec![],
        },
    );
    assert_eq!(sync_outcomes(&fx)[0].1.assignment, Bytes::from_static(b"x"));
    assert_eq!(g.heartbeat(6, "old", 1, Some("inst-1")), Err(GroupError::FencedInstanceId));
    assert!(g.members.contains_key("new"));
    assert!(!g.members.contains_key("old"));
    // With changed subscription metadata it is a real rejoin: rebalance.
    let mut changed = p;
    changed.protocols = vec![("range".into(), Bytes::from_static(b"other topics"))];
    g.join(7, 5, changed, || "newer".into());
    assert!(matches!(g.state, GroupState::PreparingRebalance | GroupState::CompletingRebalance));
    assert!(g.members.contains_key("newer"));
}

#[test]
fn protocol_selection_follows_votes() {
    let mut g = Group::new("g", GroupLimits::default(), 0);
    let mut p1 = params("", &["cooperative-sticky", "range"]);
    p1.require_known_member_id = false;
    let mut p2 = params("", &["range", "cooperative-sticky"]);
    p2.require_known_member_id = false;
    let mut p3 = params("", &["range"]);
    p3.require_known_member_id = false;
    g.join(0, 1, p1.clone(), || "m1".into());
    g.tick(0);
    g.sync(
        0,
        2,
        SyncParams {
            member_id: "m1",
            generation_id: 1,
            group_instance_id: None,
            protocol_type: None,
            protocol_name: None,
            assignments: vec![],
        },
    );
    assert_eq!(g.protocol_name.as_deref(), Some("cooperative-sticky"));
    g.join(1, 3, p2, || "m2".into());
    p1.member_id = "m1".into();
    let fx = g.join(1, 4, p1, || unreachable!());
    // common = [cooperative-sticky, range]; votes 1:1 → first member's order.
    assert_eq!(join_outcomes(&fx)[0].1.protocol_name.as_deref(), Some("cooperative-sticky"));
    let fx = g.join(2, 5, p3, || "m3".into());
    assert!(join_outcomes(&fx).is_empty());
    assert_eq!(g.common_protocols(), vec!["range".to_string()]);
}

#[test]
fn members_starting_together_land_in_the_first_generation() {
    let mut g = Group::new("g", GroupLimits::default(), 0);
    let (a, fx) = first_join(&mut g, 0, 1, "a");
    assert!(join_outcomes(&fx).is_empty());
    // b joins 5 ms later, before the coordinator's clock ticks.
    let (b, fx) = first_join(&mut g, 5, 2, "b");
    assert!(join_outcomes(&fx).is_empty());
    let out = join_outcomes(&g.tick(100));
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(|(_, o)| o.generation_id == 1 && o.error.is_none()));
    assert!(g.members.contains_key(&a) && g.members.contains_key(&b));
}

#[test]
fn an_initial_delay_holds_the_first_generation_open() {
    let limits = GroupLimits { initial_rebalance_delay_ms: 3_000, ..GroupLimits::default() };
    let mut g = Group::new("g", limits, 0);
    first_join(&mut g, 0, 1, "a");
    assert!(join_outcomes(&g.tick(2_999)).is_empty());
    first_join(&mut g, 2_500, 2, "b");
    // b arrived during the delay, so the timer is extended once more (Kafka's initial
    // delayed join), and the generation completes when a whole delay passes with no one new.
    assert!(join_outcomes(&g.tick(3_000)).is_empty());
    assert!(join_outcomes(&g.tick(5_999)).is_empty());
    let out = join_outcomes(&g.tick(6_000));
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(|(_, o)| o.generation_id == 1));
}

#[test]
fn the_initial_delay_is_extended_at_most_up_to_the_rebalance_timeout() {
    let limits = GroupLimits { initial_rebalance_delay_ms: 20_000, ..GroupLimits::default() };
    let mut g = Group::new("g", limits, 0);
    first_join(&mut g, 0, 1, "a");
    first_join(&mut g, 1_000, 2, "b");
    // 20 s delay, then a last 10 s: the 30 s rebalance timeout bounds the whole wait even
    // though c joins during the extension.
    assert!(join_outcomes(&g.tick(20_000)).is_empty());
    first_join(&mut g, 25_000, 3, "c");
    assert!(join_outcomes(&g.tick(29_999)).is_empty());
    assert_eq!(join_outcomes(&g.tick(30_000)).len(), 3);
}

#[test]
fn restore_brings_members_back_with_fresh_sessions() {
    let members = vec![RestoredMember {
        member_id: "m".into(),
        group_instance_id: None,
        client_id: "c".into(),
        client_host: "h".into(),
        rebalance_timeout_ms: REBALANCE,
        session_timeout_ms: SESSION,
        subscription: Bytes::from_static(b"s"),
        assignment: Bytes::from_static(b"a"),
    }];
    let mut g = Group::restore(
        "g",
        GroupLimits::default(),
        7,
        Some("consumer".into()),
        Some("range".into()),
        Some("m".into()),
        members,
        1000,
    );
    assert_eq!(g.state, GroupState::Stable);
    assert_eq!(g.heartbeat(1001, "m", 7, None), Ok(()));
    let fx = g.sync(
        1002,
        1,
        SyncParams {
            member_id: "m",
            generation_id: 7,
            group_instance_id: None,
            protocol_type: None,
            protocol_name: None,
            assignments: vec![],
        },
    );
    assert_eq!(sync_outcomes(&fx)[0].1.assignment, Bytes::from_static(b"a"));
    g.tick(1001 + SESSION as i64 + 1);
    assert!(g.members.is_empty());
    assert_eq!(g.state, GroupState::Empty);
}
