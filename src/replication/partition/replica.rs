//! Replication on one partition: the leader's side of a follower's fetch (read to the log
//! end offset, detect a diverging follower log, record the follower's position), and the
//! follower's side (append what the leader sent as is, truncate, follow the leader's high
//! watermark). Every follower-side change names the leadership and position it was
//! fetched under, so the answer to a fetch made before a role change or a truncation is
//! refused instead of landing in the wrong place.

use super::{Partition, PartitionError, PartitionState, Role};
use crate::controller::PartitionImage;
use crate::replication::isr_sink::IsrProposalAt;
use crate::replication::producer_state::ProducerStateTable;
use crate::replication::replica_fetch::{FetchedData, ReplicaFetchError};
use crate::storage::{LogSlices, StorageError};

/// What a follower fetches with: the leadership it follows and its log's position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerFetchState {
    pub leader: i32,
    pub leader_epoch: i32,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    /// Epoch of the last batch in the log: the leader checks it against its own epochs
    /// and answers a diverging epoch when the logs part (KIP-320's truncation by fetch).
    pub last_fetched_epoch: Option<i32>,
}

/// What a follower did with its leader's answer ([`Partition::apply_fetched`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchApplied {
    /// The leader's log starts past this follower's end: the follower emptied its log,
    /// which now starts (and ends) at `log_start_offset`.
    StartedOver { log_start_offset: i64 },
    /// The logs parted after `epoch`, which ends at `end_offset` in the leader's log: the
    /// follower truncated to `to`.
    Truncated { epoch: i32, end_offset: i64, to: i64 },
    /// `bytes` of records appended (none, for an answer without records).
    Appended { bytes: usize, high_watermark_moved: bool },
}

/// The leader's answer to one partition of a follower's fetch.
#[derive(Debug, Clone)]
pub struct ReplicaRead {
    /// Whole batches from the fetch offset, up to the log end offset (not the HW).
    pub records: LogSlices,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    /// The follower's log diverges from this leader's: it truncates to the end offset of
    /// this epoch (at most) before fetching again. No records come with it.
    pub diverging_epoch: Option<(i32, i64)>,
    /// The follower's position moved the high watermark (what waits on it may proceed).
    pub high_watermark_moved: bool,
    /// The follower was in the ISR when it fetched (an in-sync replica is never
    /// throttled).
    pub in_sync: bool,
    /// `leader.replication.throttled.replicas` names this leader's replica: the bytes
    /// count against the leader's replication quota.
    pub leader_throttled: bool,
}

impl Partition {
    /// Follow `pi.leader` in `pi.leader_epoch`: no more produces or consumer reads here.
    /// The high watermark is kept (capped at the log end offset); the log is not
    /// truncated here: the first fetch from the new leader finds any divergence.
    /// Returns whether the leadership this broker follows changed.
    pub fn become_follower(&self, pi: &PartitionImage) -> bool {
        let mut s = self.lock();
        let role = Role::Follower { leader: pi.leader };
        let changed = s.role != role || s.leader_epoch != pi.leader_epoch;
        let hw = s.known_high_watermark().min(s.log.log_end_offset());
        s.role = role;
        s.leader_epoch = pi.leader_epoch;
        s.partition_epoch = pi.partition_epoch;
        s.metadata_isr.clone_from(&pi.isr);
        s.metadata_replicas.clone_from(&pi.replicas);
        s.metadata_eligible = super::eligible_of(pi);
        s.follower_high_watermark = hw;
        s.isr_change_in_flight = None;
        s.unsent_isr_proposal = None;
        changed
    }

    /// `Some` while this broker follows another for the partition.
    pub fn follower_fetch_state(&self) -> Option<FollowerFetchState> {
        let s = self.lock();
        let Role::Follower { leader } = s.role else { return None };
        // An offline log dir's replicas are not fetched (as Kafka drops them from its
        // fetchers): they could append nothing, and a fetch at an unchanged log end
        // offset would look caught up to an idle leader, which would propose it back
        // into the ISR it was taken out of.
        if s.deleted || s.check_online().is_err() {
            return None;
        }
        Some(FollowerFetchState {
            leader,
            leader_epoch: s.leader_epoch,
            log_start_offset: s.log.log_start_offset(),
            log_end_offset: s.log.log_end_offset(),
            last_fetched_epoch: s.log.latest_epoch(),
        })
    }

    /// Appends batches fetched from the leader with `fetched` as they are (Kafka's
    /// `appendAsFollower`): offsets and leader epochs unchanged; producer state updated.
    /// Returns the new log end offset.
    pub fn append_as_follower(
        &self,
        fetched: &FollowerFetchState,
        records: &[u8],
        now_ms: i64,
    ) -> Result<i64, PartitionError> {
        let mut s = self.lock();
        s.check_fetched_under(fetched)?;
        s.check_online()?;
        s.log.append_as_follower(records, now_ms).map_err(|e| s.on_storage_error(self, e))?;
        let headers = crate::storage::batch::split_batches(records)?;
        for h in headers.iter().filter(|h| !h.is_control()) {
            s.producers.record(h, h.base_offset, h.last_offset());
        }
        Ok(s.log.log_end_offset())
    }

    /// The leader's high watermark, capped at what this follower holds. Returns the new
    /// high watermark if it changed.
    pub fn set_follower_high_watermark(&self, fetched: &FollowerFetchState, leader_hw: i64) -> Option<i64> {
        let mut s = self.lock();
        s.check_fetched_under(fetched).ok()?;
        let hw = leader_hw.min(s.log.log_end_offset()).max(s.log.log_start_offset());
        (hw != s.follower_high_watermark).then(|| {
            s.follower_high_watermark = hw;
            hw
        })
    }

    /// The leader's log start offset moved (retention or DeleteRecords there): the
    /// follower follows, as far as its high watermark (Kafka's
    /// `maybeIncrementLogStartOffset` on a follower). Returns the new log start offset if
    /// it moved.
    pub fn follow_log_start_offset(
        &self,
        fetched: &FollowerFetchState,
        leader_log_start_offset: i64,
    ) -> Result<Option<i64>, PartitionError> {
        let mut s = self.lock();
        s.check_leadership(fetched)?;
        let target = leader_log_start_offset.min(s.follower_high_watermark);
        if target <= s.log.log_start_offset() {
            return Ok(None);
        }
        Ok(Some(s.log.delete_records_before(target)?))
    }

    /// Removes the follower's records at and above `offset` (a diverging tail).
    pub fn truncate_as_follower(&self, fetched: &FollowerFetchState, offset: i64) -> Result<(), PartitionError> {
        let mut s = self.lock();
        s.check_fetched_under(fetched)?;
        s.log.truncate_to(offset)?;
        s.after_truncation()
    }

    /// The leader says this follower's log diverges from its own after `epoch`, which
    /// ends at `end_offset` in the leader's log. Truncates to where the two agree, as far
    /// as this follower can tell (Kafka's `getOffsetTruncationState`): when the follower
    /// knows `epoch`, to the smaller end of it; when its largest epoch below is another,
    /// to that one's end (the next fetch names that epoch and the leader checks again);
    /// when it knows no epoch that old, to the leader's end offset. Returns the new log
    /// end offset.
    pub fn truncate_diverging_tail(
        &self,
        fetched: &FollowerFetchState,
        epoch: i32,
        end_offset: i64,
    ) -> Result<i64, PartitionError> {
        let mut s = self.lock();
        s.check_fetched_under(fetched)?;
        let leo = s.log.log_end_offset();
        let to = match s.log.end_offset_for_epoch(epoch) {
            Some((own_epoch, own_end)) if own_epoch == epoch => own_end.min(end_offset),
            Some((_, own_end)) => own_end,
            None => end_offset,
        }
        .min(leo);
        s.log.truncate_to(to)?;
        s.after_truncation()?;
        Ok(s.log.log_end_offset())
    }

    /// The leader's log starts past this follower's end (OFFSET_OUT_OF_RANGE): starts
    /// over, empty, at the leader's log start offset.
    pub fn truncate_fully_as_follower(&self, fetched: &FollowerFetchState, offset: i64) -> Result<(), PartitionError> {
        let mut s = self.lock();
        s.check_fetched_under(fetched)?;
        s.log.truncate_fully_and_start_at(offset)?;
        s.follower_high_watermark = offset;
        s.after_truncation()
    }

    /// The follower applies its leader's answer to a fetch made at `state` (Kafka's
    /// `processFetchRequest` for one partition): a leader whose log starts past this
    /// follower's end makes it start over there; a diverging epoch truncates the tail;
    /// otherwise the records are appended as they are, and the high watermark and the
    /// log start offset follow the leader's. Other errors come back for the fetcher to
    /// retry after a backoff.
    pub fn apply_fetched(
        &self,
        state: &FollowerFetchState,
        result: Result<&FetchedData, &ReplicaFetchError>,
        now_ms: i64,
    ) -> Result<FetchApplied, PartitionError> {
        let data = match result {
            Ok(data) => data,
            Err(&ReplicaFetchError::OffsetOutOfRange { log_start_offset })
                if log_start_offset > state.log_end_offset =>
            {
                self.truncate_fully_as_follower(state, log_start_offset)?;
                return Ok(FetchApplied::StartedOver { log_start_offset });
            }
            Err(e) => return Err(PartitionError::Replica(e.clone())),
        };
        if let Some((epoch, end_offset)) = data.diverging_epoch {
            let to = self.truncate_diverging_tail(state, epoch, end_offset)?;
            return Ok(FetchApplied::Truncated { epoch, end_offset, to });
        }
        let mut now_at = *state;
        if !data.records.is_empty() {
            now_at.log_end_offset = self.append_as_follower(state, &data.records, now_ms)?;
        }
        let high_watermark_moved = self.set_follower_high_watermark(&now_at, data.high_watermark).is_some();
        self.follow_log_start_offset(&now_at, data.log_start_offset)?;
        Ok(FetchApplied::Appended { bytes: data.records.len(), high_watermark_moved })
    }

    /// The leader's side of a fetch from follower `replica` (its process's broker epoch
    /// `replica_epoch`, -1 if not given) at `fetch_offset`: checks the
    /// request's leader epoch and, with `last_fetched_epoch`, that the follower's log does
    /// not diverge (Kafka's `Partition.fetchRecords` for a follower); then reads up to the
    /// log end offset and records the follower's position. A diverging answer records
    /// nothing: the follower's offset is not a position in this log.
    #[allow(clippy::too_many_arguments)]
    pub fn read_for_follower(
        &self,
        replica: i32,
        replica_epoch: i64,
        current_leader_epoch: i32,
        fetch_offset: i64,
        last_fetched_epoch: Option<i32>,
        max_bytes: usize,
        now_ms: i64,
    ) -> Result<ReplicaRead, PartitionError> {
        let mut s = self.lock();
        s.check_leader_epoch(current_leader_epoch)?;
        if s.role != Role::Leader {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        if !s.isr.is_replica(replica) {
            return Err(PartitionError::NotAReplica(replica));
        }
        let log_start_offset = s.log.log_start_offset();
        let log_end_offset = s.log.log_end_offset();
        let in_sync = s.isr.isr().contains(&replica);
        let leader_throttled = s.config.leader_throttled.covers(self.index, s.isr.leader());
        if let Some(epoch) = last_fetched_epoch {
            let Some((end_epoch, end_offset)) = s.end_offset_for_epoch(epoch) else {
                return Err(
                    StorageError::OffsetOutOfRange { offset: fetch_offset, log_start_offset, log_end_offset }.into()
                );
            };
            if end_epoch < epoch || end_offset < fetch_offset {
                return Ok(ReplicaRead {
                    records: LogSlices::default(),
                    high_watermark: s.isr.high_watermark(),
                    log_start_offset,
                    log_end_offset,
                    diverging_epoch: Some((end_epoch, end_offset)),
                    high_watermark_moved: false,
                    in_sync,
                    leader_throttled,
                });
            }
        }
        let records = s.log.read_slices(fetch_offset, max_bytes, i64::MAX)?;
        let (moved, proposal) = s.isr.on_follower_fetch(replica, fetch_offset, replica_epoch, now_ms);
        s.note_proposal(proposal);
        Ok(ReplicaRead {
            records,
            high_watermark: s.isr.high_watermark(),
            log_start_offset,
            log_end_offset,
            diverging_epoch: None,
            high_watermark_moved: moved.is_some(),
            in_sync,
            leader_throttled,
        })
    }

    /// Whether this follower's replica is throttled
    /// (`follower.replication.throttled.replicas` names broker `node_id`'s replica) and
    /// not in the ISR the metadata gives: what a follower's replication quota holds back.
    pub fn follower_throttled_out_of_sync(&self, node_id: i32) -> bool {
        let s = self.lock();
        s.config.follower_throttled.covers(self.index, node_id) && !s.metadata_isr.contains(&node_id)
    }

    /// Whether `follower.replication.throttled.replicas` names broker `node_id`'s replica.
    pub fn follower_throttled(&self, node_id: i32) -> bool {
        self.lock().config.follower_throttled.covers(self.index, node_id)
    }

    /// An ISR change proposed (or to be sent again) since the last call, to hand to the
    /// controller, with the leader and partition epochs it was made in.
    pub fn take_isr_proposal(&self) -> Option<IsrProposalAt> {
        let mut s = self.lock();
        let proposal = s.unsent_isr_proposal.take()?;
        Some(IsrProposalAt { proposal, leader_epoch: s.leader_epoch, partition_epoch: s.partition_epoch })
    }

    /// On a leader: followers in the ISR that have lagged past `replica.lag.time.max.ms`
    /// (proposed once until the metadata changes).
    pub fn check_isr_lag(&self, now_ms: i64) -> Option<IsrProposalAt> {
        {
            let mut s = self.lock();
            if s.role != Role::Leader || s.deleted {
                return None;
            }
            let proposal = s.isr.lagging(now_ms);
            s.note_proposal(proposal);
        }
        self.take_isr_proposal()
    }
}

#[cfg(test)]
impl Partition {
    /// Every batch in the log, whatever the role (tests compare replicas byte for byte).
    pub(crate) fn log_bytes(&self) -> bytes::Bytes {
        let s = self.lock();
        s.log.read(s.log.log_start_offset(), usize::MAX, i64::MAX).unwrap()
    }

    /// The leader epoch cache's end of `epoch`, whatever the role.
    pub(crate) fn log_end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        self.lock().log.end_offset_for_epoch(epoch)
    }
}

impl PartitionState {
    /// A follower-side change is applied only under the leadership and at the position
    /// its fetch was made with.
    fn check_fetched_under(&self, fetched: &FollowerFetchState) -> Result<(), PartitionError> {
        self.check_leadership(fetched)?;
        let log_end_offset = self.log.log_end_offset();
        if log_end_offset != fetched.log_end_offset {
            return Err(PartitionError::FetchOffsetMoved { fetch_offset: fetched.log_end_offset, log_end_offset });
        }
        Ok(())
    }

    /// Still following the same leader in the same epoch as when `fetched` was taken.
    fn check_leadership(&self, fetched: &FollowerFetchState) -> Result<(), PartitionError> {
        if self.deleted || self.role != (Role::Follower { leader: fetched.leader }) {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        if self.leader_epoch != fetched.leader_epoch {
            return Err(PartitionError::LeaderEpochChanged {
                fetched: fetched.leader_epoch,
                current: self.leader_epoch,
            });
        }
        Ok(())
    }

    fn after_truncation(&mut self) -> Result<(), PartitionError> {
        let leo = self.log.log_end_offset();
        self.follower_high_watermark = self.follower_high_watermark.min(leo);
        self.flushed_through = self.flushed_through.min(leo);
        // Rare (a leader change with a diverging tail), so a full rebuild is fine.
        let headers = self.log.batch_headers_from(self.log.log_start_offset())?;
        self.producers = ProducerStateTable::rebuild(headers.iter());
        Ok(())
    }
}
