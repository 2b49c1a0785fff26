//! The leader's view of its replicas: who is in sync, and the high watermark that
//! follows from it. A pure state machine (positions and `now` in; a new high watermark
//! and ISR-change proposals out) with no I/O and no clock of its own, so the rules are
//! tested by moving time by hand.
//!
//! Kafka's rules (`Partition.scala`, `maybeIncrementLeaderHW`, `maybeShrinkIsr`):
//! * the high watermark is the smallest log end offset among the ISR (the leader
//!   included), and it never moves back while this broker stays leader;
//! * a follower is *caught up* at a fetch whose offset reaches the leader's log end
//!   offset; one that has not been caught up for `replica.lag.time.max.ms` is proposed
//!   for removal from the ISR;
//! * a follower outside the ISR whose log end offset reaches the high watermark, and the
//!   leader's log end offset when its leader epoch began, is proposed for addition (the
//!   second condition is Kafka's fix for KAFKA-7128: a new leader's high watermark can
//!   lag what the old leader acknowledged, and a follower admitted at that lagging mark
//!   could be elected without acknowledged records);
//! * from that proposal until the answer the high watermark waits for the follower as
//!   for an ISR member (Kafka's *maximal ISR*, KIP-497): the controller may commit the
//!   addition before this leader hears of it, and every ISR member must hold every
//!   record below the high watermark, or electing it would lose acknowledged writes;
//! * the proposal names the follower's process (its broker epoch) whose fetch showed it
//!   caught up (KIP-903): a fetch can arrive after the process that sent it died, and a
//!   process restarted after a power loss may lack what the old one had fetched, so the
//!   controller lets the follower in only while that process is still the current one;
//! * a process the controller refused to add is not proposed again for
//!   [`EXPANSION_RETRY_MS`] (this leader cannot see why it was refused: fenced, shutting
//!   down, or replaced), but a newer process of the same follower is proposed at once,
//!   even at the refusal itself if it fetched while the refused proposal was out.
//!
//! Proposals go to the controller (AlterPartition); the ISR here changes only when the
//! committed metadata says so ([`IsrState::set_isr`]). On a single node the ISR is the
//! leader alone and the high watermark is the log end offset.

use std::collections::BTreeMap;

use crate::controller::broker_liveness::NO_BROKER_EPOCH;

/// How long a follower's process that the controller refused to add to the ISR is not
/// proposed again. The leader does not see why it was refused (Kafka's leader checks its
/// metadata cache for a fenced, shutting-down or replaced broker before it proposes;
/// runnel's image does not name processes), and without a wait every fetch of that
/// process would ask again. A newer process of the follower does not wait: after a
/// restart, the wait (and a caught-up follower's fetch, which can idle for
/// `replica.fetch.wait.max.ms` when no records come) would keep the ISR short and
/// acks=all writes refused for that long.
pub const EXPANSION_RETRY_MS: i64 = 500;

/// What the leader knows of one follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Follower {
    log_end_offset: i64,
    last_caught_up_ms: i64,
    /// The broker epoch its last fetch carried (-1: not given).
    broker_epoch: i64,
    /// `(broker epoch, until)`: the controller refused to add that process; it is not
    /// proposed again before `until` (ms).
    refused: Option<(i64, i64)>,
}

impl Follower {
    fn new(now_ms: i64) -> Follower {
        Follower { log_end_offset: -1, last_caught_up_ms: now_ms, broker_epoch: NO_BROKER_EPOCH, refused: None }
    }
}

/// An ISR change this leader asks the controller for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IsrProposal {
    Shrink {
        remove: Vec<i32>,
    },
    /// `broker_epoch`: the process of `add` whose fetch showed it caught up (-1 when
    /// that fetch did not say).
    Expand {
        add: i32,
        broker_epoch: i64,
    },
}

#[derive(Debug, Clone)]
pub struct IsrState {
    leader: i32,
    leader_log_end_offset: i64,
    followers: BTreeMap<i32, Follower>,
    /// In-sync replicas, the leader included.
    isr: Vec<i32>,
    /// A follower proposed for the ISR whose answer has not come ([`IsrState::expanding`]).
    adding: Option<i32>,
    high_watermark: i64,
    /// The leader's log end offset when its leader epoch began: a follower joins the ISR
    /// only once it holds everything up to here.
    epoch_start_offset: i64,
    lag_time_max_ms: i64,
    /// `min.insync.replicas`: the high watermark does not move while fewer replicas than
    /// this (at most all of them) are in sync.
    min_isr: usize,
}

impl IsrState {
    /// A new leadership: `replicas` and `isr` as the metadata gives them, `log_end_offset`
    /// the leader's at the start of its leader epoch (see [`IsrState::keep_epoch_start`]).
    /// Followers count as caught up at `now` (Kafka gives them a full lag window after an
    /// election).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        leader: i32,
        replicas: &[i32],
        isr: &[i32],
        log_end_offset: i64,
        high_watermark: i64,
        lag_time_max_ms: i64,
        min_isr: usize,
        now_ms: i64,
    ) -> IsrState {
        let followers = replicas.iter().filter(|r| **r != leader).map(|r| (*r, Follower::new(now_ms))).collect();
        let mut isr = isr.to_vec();
        if !isr.contains(&leader) {
            isr.push(leader);
        }
        let mut s = IsrState {
            leader,
            leader_log_end_offset: log_end_offset,
            followers,
            isr,
            adding: None,
            high_watermark: high_watermark.min(log_end_offset),
            epoch_start_offset: log_end_offset,
            lag_time_max_ms,
            min_isr: min_isr.max(1),
        };
        s.advance_high_watermark();
        s
    }

    /// The leader alone: the single-node case.
    pub fn single(leader: i32, log_end_offset: i64) -> IsrState {
        IsrState::new(leader, &[leader], &[leader], log_end_offset, log_end_offset, i64::MAX, 1, 0)
    }

    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// A new set of replicas within the same leader epoch (a reassignment): the epoch
    /// began where `before`'s did.
    pub fn keep_epoch_start(&mut self, before: &IsrState) {
        self.epoch_start_offset = before.epoch_start_offset;
    }

    pub fn isr(&self) -> &[i32] {
        &self.isr
    }

    /// Whether this state is `leader`'s with exactly `replicas`.
    pub fn has_replicas(&self, leader: i32, replicas: &[i32]) -> bool {
        let followers = replicas.iter().filter(|r| **r != leader);
        self.leader == leader
            && followers.clone().count() == self.followers.len()
            && followers.into_iter().all(|r| self.followers.contains_key(r))
    }

    /// `(ISR size, effective min.insync.replicas)` when the ISR is below it. The effective
    /// value is `min.insync.replicas` capped at the partition's replica count, as Kafka's
    /// `Partition.effectiveMinIsr`: a setting no ISR of this size could meet does not stop
    /// acks=all writes.
    pub fn under_min_isr(&self) -> Option<(usize, usize)> {
        let min_isr = self.min_isr.min(self.followers.len() + 1);
        (self.isr.len() < min_isr).then_some((self.isr.len(), min_isr))
    }

    /// A new `min.insync.replicas`. Returns the new high watermark if it moved (a lower
    /// minimum can release it).
    pub fn set_min_isr(&mut self, min_isr: usize) -> Option<i64> {
        self.min_isr = min_isr.max(1);
        self.advance_high_watermark()
    }

    /// Whether `replica` is one of this leader's followers.
    pub fn is_replica(&self, replica: i32) -> bool {
        self.followers.contains_key(&replica)
    }

    /// The leader appended: its log end offset is now `log_end_offset`. Returns the new
    /// high watermark if it moved.
    pub fn on_leader_append(&mut self, log_end_offset: i64) -> Option<i64> {
        self.leader_log_end_offset = log_end_offset;
        self.advance_high_watermark()
    }

    /// A follower's process (`broker_epoch`) fetched from `fetch_offset` (its log end
    /// offset) at `now`. Returns the new high watermark if it moved, and an expansion
    /// proposal if the follower is back.
    pub fn on_follower_fetch(
        &mut self,
        replica: i32,
        fetch_offset: i64,
        broker_epoch: i64,
        now_ms: i64,
    ) -> (Option<i64>, Option<IsrProposal>) {
        let leader_leo = self.leader_log_end_offset;
        let Some(f) = self.followers.get_mut(&replica) else { return (None, None) };
        f.log_end_offset = fetch_offset.min(leader_leo);
        f.broker_epoch = broker_epoch;
        if fetch_offset >= leader_leo {
            f.last_caught_up_ms = now_ms;
        }
        let rejoin = self.rejoin(replica, now_ms);
        (self.advance_high_watermark(), rejoin)
    }

    /// An expansion proposal for `replica` if it is outside the ISR, caught up (its log
    /// end offset reaches the high watermark and the start of this leader epoch) and its
    /// current process was not refused within [`EXPANSION_RETRY_MS`].
    fn rejoin(&self, replica: i32, now_ms: i64) -> Option<IsrProposal> {
        let f = self.followers.get(&replica)?;
        let caught_up = f.log_end_offset >= self.high_watermark && f.log_end_offset >= self.epoch_start_offset;
        let refused = f.refused.is_some_and(|(epoch, until)| epoch == f.broker_epoch && now_ms < until);
        (!self.isr.contains(&replica) && caught_up && !refused)
            .then_some(IsrProposal::Expand { add: replica, broker_epoch: f.broker_epoch })
    }

    /// KIP-392: the followers a consumer reading from `fetch_offset` could be sent to
    /// instead: in the ISR and holding that offset, as `(id, log end offset, ms since
    /// caught up)`. (Kafka also checks each follower's log start offset; runnel's
    /// followers move theirs with the leader's, and a consumer sent below one gets
    /// OFFSET_OUT_OF_RANGE from the follower and goes back to the leader.)
    pub fn read_candidates(&self, fetch_offset: i64, now_ms: i64) -> Vec<(i32, i64, i64)> {
        self.followers
            .iter()
            .filter(|(id, f)| self.isr.contains(id) && f.log_end_offset >= fetch_offset)
            .map(|(id, f)| (*id, f.log_end_offset, now_ms.saturating_sub(f.last_caught_up_ms).max(0)))
            .collect()
    }

    pub fn leader(&self) -> i32 {
        self.leader
    }

    pub fn leader_log_end_offset(&self) -> i64 {
        self.leader_log_end_offset
    }

    /// Followers in the ISR that have not caught up for longer than the lag limit.
    pub fn lagging(&self, now_ms: i64) -> Option<IsrProposal> {
        let remove: Vec<i32> = self
            .isr
            .iter()
            .filter_map(|r| self.followers.get(r).map(|f| (*r, f)))
            .filter(|(_, f)| now_ms.saturating_sub(f.last_caught_up_ms) > self.lag_time_max_ms)
            .map(|(r, _)| r)
            .collect();
        (!remove.is_empty()).then_some(IsrProposal::Shrink { remove })
    }

    /// `add` was proposed for the ISR: until [`IsrState::set_isr`] or
    /// [`IsrState::expansion_refused`], the high watermark waits for it too.
    pub fn expanding(&mut self, add: i32) {
        if self.followers.contains_key(&add) && !self.isr.contains(&add) {
            self.adding = Some(add);
        }
    }

    /// The controller turned down adding `add`'s process `broker_epoch` at `now`: it was
    /// not committed, so the high watermark stops waiting for it, and that process is not
    /// proposed again for [`EXPANSION_RETRY_MS`]. Returns the new high watermark if it
    /// moved, and a new proposal if a newer process of `add` has fetched caught up
    /// meanwhile (its next fetch may be a long poll away).
    pub fn expansion_refused(
        &mut self,
        add: i32,
        broker_epoch: i64,
        now_ms: i64,
    ) -> (Option<i64>, Option<IsrProposal>) {
        self.adding = None;
        if let Some(f) = self.followers.get_mut(&add) {
            f.refused = Some((broker_epoch, now_ms.saturating_add(EXPANSION_RETRY_MS)));
        }
        let high_watermark = self.advance_high_watermark();
        (high_watermark, self.rejoin(add, now_ms))
    }

    /// The committed ISR (from the metadata, at a new partition epoch: a proposal made
    /// at the previous one can no longer commit). Returns the new high watermark if it
    /// moved.
    pub fn set_isr(&mut self, isr: &[i32]) -> Option<i64> {
        self.adding = None;
        self.isr = isr.to_vec();
        if !self.isr.contains(&self.leader) {
            self.isr.push(self.leader);
        }
        self.advance_high_watermark()
    }

    /// The high watermark is the smallest log end offset in the ISR and the follower
    /// being added to it, and does not move while the ISR is smaller than the effective
    /// `min.insync.replicas` (Kafka 4's `maybeIncrementLeaderHW`, KIP-966): no reader
    /// sees, and no acks=all write is answered for, a record held by fewer replicas than
    /// the topic asks.
    fn advance_high_watermark(&mut self) -> Option<i64> {
        if self.under_min_isr().is_some() {
            return None;
        }
        let min = self
            .isr
            .iter()
            .chain(self.adding.iter())
            .map(|r| match self.followers.get(r) {
                Some(f) => f.log_end_offset,
                None => self.leader_log_end_offset,
            })
            .min()
            .unwrap_or(self.leader_log_end_offset);
        (min > self.high_watermark).then(|| {
            self.high_watermark = min;
            min
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAG: i64 = 30_000;

    fn three(now: i64) -> IsrState {
        IsrState::new(1, &[1, 2, 3], &[1, 2, 3], 0, 0, LAG, 1, now)
    }

    #[test]
    fn single_node_high_watermark_is_the_log_end_offset() {
        let mut s = IsrState::single(1, 7);
        assert_eq!(s.high_watermark(), 7);
        assert_eq!(s.on_leader_append(10), Some(10));
        assert_eq!(s.lagging(i64::MAX), None);
    }

    /// KIP-903: the proposal names the follower's process whose fetch showed it caught
    /// up, so the controller can turn it down if that process has been replaced.
    #[test]
    fn an_expansion_names_the_process_whose_fetch_showed_the_follower_caught_up() {
        let mut s = IsrState::new(1, &[1, 2], &[1], 10, 10, LAG, 1, 0);
        assert_eq!(s.on_follower_fetch(2, 4, 77, 1), (None, None));
        assert_eq!(s.on_follower_fetch(2, 10, 78, 2), (None, Some(IsrProposal::Expand { add: 2, broker_epoch: 78 })));
    }

    /// A refused process waits [`EXPANSION_RETRY_MS`] before it is proposed again; a
    /// newer process of the same follower (a restart) does not wait, and one that fetched
    /// while the refused proposal was out is proposed at the refusal.
    #[test]
    fn a_refused_process_waits_before_it_is_proposed_again_and_a_newer_one_does_not() {
        let mut s = IsrState::new(1, &[1, 2], &[1], 10, 10, LAG, 1, 0);
        let old = IsrProposal::Expand { add: 2, broker_epoch: 77 };
        assert_eq!(s.on_follower_fetch(2, 10, 77, 1), (None, Some(old.clone())));
        s.expanding(2);
        assert_eq!(s.expansion_refused(2, 77, 2), (None, None), "77 was the last process to fetch");
        assert_eq!(s.on_follower_fetch(2, 10, 77, 3), (None, None));
        assert_eq!(s.on_follower_fetch(2, 10, 77, 2 + EXPANSION_RETRY_MS - 1), (None, None));
        assert_eq!(s.on_follower_fetch(2, 10, 77, 2 + EXPANSION_RETRY_MS), (None, Some(old.clone())));
        // A restart: the new process's fetch gets proposed though the old one was just refused.
        s.expanding(2);
        assert_eq!(s.expansion_refused(2, 77, 1000), (None, None));
        let new = IsrProposal::Expand { add: 2, broker_epoch: 78 };
        assert_eq!(s.on_follower_fetch(2, 10, 78, 1001), (None, Some(new)));
        // The new process fetched while the old one's proposal was out (the leader keeps
        // one proposal in flight): the refusal of the old one proposes the new one.
        s.expanding(2);
        let newer = IsrProposal::Expand { add: 2, broker_epoch: 79 };
        assert_eq!(s.on_follower_fetch(2, 10, 79, 1002), (None, Some(newer.clone())), "held back by the partition");
        assert_eq!(s.expansion_refused(2, 78, 1003), (None, Some(newer)));
        // Not while it is behind.
        let mut s = IsrState::new(1, &[1, 2], &[1], 10, 10, LAG, 1, 0);
        s.on_follower_fetch(2, 10, 77, 1);
        s.expanding(2);
        s.on_follower_fetch(2, 4, 78, 2);
        assert_eq!(s.expansion_refused(2, 77, 3), (None, None), "78 is behind the high watermark");
    }

    #[test]
    fn high_watermark_stays_while_the_isr_is_below_the_minimum() {
        let mut s = IsrState::new(1, &[1, 2, 3], &[1, 2, 3], 0, 0, LAG, 2, 0);
        assert_eq!(s.on_leader_append(10), None);
        assert_eq!(s.set_isr(&[1]), None, "the leader alone is below 2");
        assert_eq!(s.under_min_isr(), Some((1, 2)));
        assert_eq!(s.on_follower_fetch(2, 10, -1, 5), (None, Some(IsrProposal::Expand { add: 2, broker_epoch: -1 })));
        assert_eq!(s.set_isr(&[1, 2]), Some(10));
        // The minimum counts at most the replicas.
        let s = IsrState::new(1, &[1], &[1], 0, 0, LAG, 3, 0);
        assert_eq!(s.under_min_isr(), None);
        // A lower minimum releases it.
        let mut s = IsrState::new(1, &[1, 2], &[1], 7, 0, LAG, 2, 0);
        assert_eq!(s.high_watermark(), 0);
        assert_eq!(s.set_min_isr(1), Some(7));
    }

    #[test]
    fn high_watermark_waits_for_the_slowest_in_sync_follower() {
        let mut s = three(0);
        assert_eq!(s.on_leader_append(10), None);
        assert_eq!(s.on_follower_fetch(2, 10, -1, 5), (None, None));
        assert_eq!(s.on_follower_fetch(3, 4, -1, 5), (Some(4), None));
        assert_eq!(s.on_follower_fetch(3, 10, -1, 6), (Some(10), None));
        assert_eq!(s.high_watermark(), 10);
    }

    #[test]
    fn a_follower_stuck_past_the_lag_limit_is_proposed_for_removal_and_then_holds_nothing_back() {
        let mut s = three(0);
        s.on_leader_append(10);
        s.on_follower_fetch(2, 10, -1, 1_000);
        s.on_follower_fetch(3, 2, -1, 1_000);
        assert_eq!(s.high_watermark(), 2);
        assert_eq!(s.lagging(LAG), None, "within the window");
        assert_eq!(s.lagging(LAG + 1), Some(IsrProposal::Shrink { remove: vec![3] }));
        // Nothing changes until the controller commits the shrink.
        assert_eq!(s.high_watermark(), 2);
        assert_eq!(s.set_isr(&[1, 2]), Some(10));
    }

    #[test]
    fn a_follower_that_reaches_the_high_watermark_is_proposed_back() {
        let mut s = IsrState::new(1, &[1, 2], &[1], 10, 10, LAG, 1, 0);
        assert_eq!(s.on_follower_fetch(2, 5, -1, 100), (None, None));
        assert_eq!(s.on_follower_fetch(2, 10, -1, 200), (None, Some(IsrProposal::Expand { add: 2, broker_epoch: -1 })));
    }

    /// KAFKA-7128: the new leader's high watermark (5) lags what the old leader
    /// acknowledged (up to 10, which this leader holds). A follower at 6 is past the high
    /// watermark but may lack acknowledged records: it joins only at 10.
    #[test]
    fn a_follower_joins_the_isr_only_once_it_holds_the_start_of_the_leader_epoch() {
        let s = IsrState::new(1, &[1, 2, 3], &[1], 10, 5, LAG, 1, 0);
        assert_eq!(s.high_watermark(), 10, "the leader alone");
        let mut s = IsrState::new(1, &[1, 2, 3], &[1, 2], 10, 5, LAG, 1, 0);
        assert_eq!(s.on_follower_fetch(3, 6, -1, 1), (None, None));
        assert_eq!(s.on_follower_fetch(2, 8, -1, 1), (Some(8), None));
        assert_eq!(s.on_follower_fetch(3, 9, -1, 2), (None, None), "past the high watermark, short of 10");
        assert_eq!(s.on_follower_fetch(3, 10, -1, 3), (None, Some(IsrProposal::Expand { add: 3, broker_epoch: -1 })));
        // A reassignment in the same leader epoch keeps where the epoch began.
        let mut next = IsrState::new(1, &[1, 2, 3, 4], &[1, 2], 12, 8, LAG, 1, 4);
        next.keep_epoch_start(&s);
        assert_eq!(
            next.on_follower_fetch(4, 10, -1, 5),
            (None, Some(IsrProposal::Expand { add: 4, broker_epoch: -1 }))
        );
    }

    #[test]
    fn the_high_watermark_waits_for_a_follower_proposed_for_the_isr_until_the_answer() {
        let mut s = IsrState::new(1, &[1, 2, 3], &[1, 2], 10, 10, LAG, 1, 0);
        s.on_follower_fetch(2, 10, -1, 1);
        assert_eq!(s.on_follower_fetch(3, 10, -1, 2), (None, Some(IsrProposal::Expand { add: 3, broker_epoch: -1 })));
        s.expanding(3);
        // The controller may have committed 3 already: offsets 10..20 wait for it.
        s.on_leader_append(20);
        assert_eq!(s.on_follower_fetch(2, 20, -1, 3), (None, None));
        assert_eq!(
            s.on_follower_fetch(3, 15, -1, 4),
            (Some(15), Some(IsrProposal::Expand { add: 3, broker_epoch: -1 }))
        );
        assert_eq!(s.set_isr(&[1, 2, 3]), None, "committed: 3 is a member now");
        assert_eq!(s.on_follower_fetch(3, 20, -1, 5), (Some(20), None));
        // Refused: nothing waits for it any more.
        let mut s = IsrState::new(1, &[1, 2, 3], &[1, 2], 10, 10, LAG, 1, 0);
        s.on_follower_fetch(3, 10, -1, 1);
        s.expanding(3);
        s.on_leader_append(20);
        assert_eq!(s.on_follower_fetch(2, 20, -1, 2), (None, None));
        assert_eq!(s.expansion_refused(3, -1, 3), (Some(20), None), "3 is not caught up with 20");
    }

    #[test]
    fn the_high_watermark_never_moves_back() {
        let mut s = three(0);
        s.on_leader_append(10);
        s.on_follower_fetch(2, 10, -1, 1);
        s.on_follower_fetch(3, 10, -1, 1);
        assert_eq!(s.high_watermark(), 10);
        // A follower re-fetching from lower (after its own truncation) does not pull it back.
        assert_eq!(s.on_follower_fetch(3, 3, -1, 2), (None, None));
        assert_eq!(s.high_watermark(), 10);
    }

    #[test]
    fn caught_up_means_reaching_the_leader_log_end_offset_at_the_time_of_the_fetch() {
        let mut s = three(0);
        s.on_leader_append(10);
        s.on_follower_fetch(2, 9, -1, 20_000);
        s.on_follower_fetch(3, 10, -1, 20_000);
        // Follower 2 keeps fetching but never reaches the end: the clock of its lag
        // keeps running from the election (0).
        s.on_follower_fetch(2, 9, -1, LAG + 1);
        assert_eq!(s.lagging(LAG + 1), Some(IsrProposal::Shrink { remove: vec![2] }));
    }

    #[test]
    fn read_candidates_are_in_sync_followers_holding_the_offset() {
        let mut s = IsrState::new(1, &[1, 2, 3, 4], &[1, 2, 3], 0, 0, LAG, 1, 0);
        s.on_leader_append(10);
        s.on_follower_fetch(2, 10, -1, 100);
        s.on_follower_fetch(3, 6, -1, 100);
        s.on_follower_fetch(4, 10, -1, 100);
        assert_eq!(s.read_candidates(5, 400), vec![(2, 10, 300), (3, 6, 400)]);
        assert_eq!(s.read_candidates(8, 400), vec![(2, 10, 300)], "3 does not hold offset 8; 4 is not in sync");
    }

    #[test]
    fn unknown_replicas_are_ignored() {
        let mut s = three(0);
        assert_eq!(s.on_follower_fetch(9, 100, -1, 1), (None, None));
    }
}
