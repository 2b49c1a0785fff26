//! One partition this broker hosts, as leader or follower ([`Role`]): its log, leader
//! epoch, ISR and high watermark ([`IsrState`]) and producer state, behind one lock that
//! this type owns. Only a leader takes produces and serves consumers; a follower's log
//! grows only by what its fetcher copies from the leader (`partition/replica.rs`).
//!
//! Consumers never read past the high watermark. On a single node the ISR is this
//! broker alone, so the high watermark is the log end offset as soon as an append is in
//! the leader's log. fsyncs run outside the partition lock ([`Partition::flush_through`]):
//! appends and reads go on while the disk works.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use thiserror::Error;
use uuid::Uuid;

use super::isr::IsrState;
use super::isr_sink::NotCommitted;
use super::partition_config::PartitionConfig;
use super::producer_state::{ActiveProducer, ProducerStateTable, SequenceCheck};
use super::purgatory::PartitionKey;
use super::validated::ValidatedRecords;
use crate::controller::broker_liveness::NO_BROKER_EPOCH;
use crate::controller::PartitionImage;
use crate::storage::log_dirs::DirHealth;
use crate::storage::{BatchError, CleanStats, FileCache, LogSlices, PartitionLog, PreparedClean, StorageError};

#[derive(Debug, Error)]
pub enum PartitionError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    InvalidBatch(#[from] BatchError),
    #[error("out of order sequence number: expected {expected}, got {got}")]
    OutOfOrderSequence { expected: i32, got: i32 },
    #[error("producer epoch {got} is older than the current epoch {current}")]
    InvalidProducerEpoch { current: i16, got: i16 },
    #[error("offset {offset} is beyond the high watermark {high_watermark}")]
    OffsetBeyondHighWatermark { offset: i64, high_watermark: i64 },
    #[error("records of a topic whose cleanup.policy lacks delete cannot be deleted")]
    DeleteNotAllowed,
    #[error(transparent)]
    Pool(#[from] super::blocking_pool::PoolError),
    #[error("the size of the current ISR {isr} is insufficient to satisfy the min.isr requirement of {min_isr}")]
    NotEnoughReplicas { isr: usize, min_isr: usize },
    #[error("the records were appended, but the ISR shrank to {isr}, below the min.isr requirement of {min_isr}")]
    NotEnoughReplicasAfterAppend { isr: usize, min_isr: usize },
    #[error("the write was not replicated to the in-sync replicas within {0:?}")]
    ReplicationTimedOut(Duration),
    #[error("fsync failed: {0}")]
    FlushFailed(std::io::Error),
    #[error("the broker is shutting down")]
    ShuttingDown,
    #[error("leader epoch {request} of the request is older than the current {current}")]
    FencedLeaderEpoch { request: i32, current: i32 },
    #[error("leader epoch {request} of the request is newer than the current {current}")]
    UnknownLeaderEpoch { request: i32, current: i32 },
    #[error("this broker is not the leader of the partition")]
    NotLeaderOrFollower,
    #[error("replica {0} is not a replica of the partition")]
    NotAReplica(i32),
    #[error("fetched in leader epoch {fetched}, but the partition is now in epoch {current}")]
    LeaderEpochChanged { fetched: i32, current: i32 },
    #[error("the leader answered the replica fetch with: {0}")]
    Replica(super::replica_fetch::ReplicaFetchError),
    #[error("the log directory of this partition is offline after an I/O error")]
    LogDirOffline,
    #[error("fetched from offset {fetch_offset}, but the log end offset is now {log_end_offset}")]
    FetchOffsetMoved { fetch_offset: i64, log_end_offset: i64 },
}

/// What this broker is for a partition, as the metadata image says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leader,
    /// Copies `leader`'s log; takes no produces and serves no consumers.
    Follower {
        leader: i32,
    },
}

#[derive(Debug, Clone, Copy)]
pub struct AppendResult {
    pub base_offset: i64,
    pub last_offset: i64,
    pub log_start_offset: i64,
    /// -1 unless the topic uses LogAppendTime.
    pub log_append_time: i64,
}

#[derive(Debug, Clone)]
pub struct FetchResult {
    /// Planned under the partition's lock; read or sent after it.
    pub records: LogSlices,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub last_stable_offset: i64,
}

pub(super) struct PartitionState {
    log: PartitionLog,
    config: PartitionConfig,
    leader_epoch: i32,
    role: Role,
    /// Who is in sync, and the high watermark that follows (the leader's view).
    isr: IsrState,
    /// A follower's high watermark: the leader's, capped at the local log end offset.
    follower_high_watermark: i64,
    /// False from open until the first role. Until then the high watermark is the one
    /// the log directory's `replication-offset-checkpoint` recorded
    /// (`checkpointed_high_watermark`), or without one the log start offset; a leader
    /// moves it on only as its ISR confirms (at once when the ISR is the leader alone),
    /// never exposing records that the followers may not have.
    high_watermark_known: bool,
    /// What the last checkpoint before this process recorded (see `high_watermark_known`).
    checkpointed_high_watermark: Option<i64>,
    /// The partition epoch of the last applied metadata (it moves with every change of
    /// the ISR, leader or replicas); -1 until the first.
    partition_epoch: i32,
    /// The ISR change proposed in this partition epoch and not yet answered. One at a
    /// time, as Kafka's leader: the next waits until the controller says this one was not
    /// attempted, or the metadata moves to a new partition epoch (a proposal made
    /// against an older one cannot commit any more).
    isr_change_in_flight: Option<super::isr::IsrProposal>,
    /// A proposal made (or to be sent again) but not yet handed to the
    /// [`super::IsrChangeSink`].
    unsent_isr_proposal: Option<super::isr::IsrProposal>,
    producers: ProducerStateTable,
    /// Everything below this offset is known to be on disk.
    flushed_through: i64,
    /// The topic was deleted: its directory is going or gone (a topic of the same name
    /// may reuse the path), so no background work may write there any more.
    deleted: bool,
    /// The ISR as the last applied metadata gave it, leader or follower; empty until the
    /// first. What a new leader compares against to tell an unclean election.
    metadata_isr: Vec<i32>,
    /// The replicas as the same metadata gave them.
    metadata_replicas: Vec<i32>,
    /// The replicas the same metadata let lead cleanly from outside the ISR: its eligible
    /// leader replicas and last known leader (KIP-966).
    metadata_eligible: Vec<i32>,
    /// Moves to another log directory so far: a cleaner pass planned before one is void.
    moves: u64,
    /// Whether the log directory holding the partition is offline: shared by every
    /// partition of that directory, set by the first of them to hit an I/O error.
    log_dir_offline: Arc<DirHealth>,
}

/// Which partition: topic name, topic id, partition number.
#[derive(Debug, Clone, Copy)]
pub struct PartitionId<'a> {
    pub topic: &'a str,
    pub topic_id: Uuid,
    pub index: i32,
}

pub struct Partition {
    pub topic: String,
    pub topic_id: Uuid,
    pub index: i32,
    state: Mutex<PartitionState>,
    /// One fsync at a time per partition; a caller that waited here finds its offset
    /// already covered by the fsync it waited behind (group commit).
    flush_lock: tokio::sync::Mutex<()>,
    /// Record bytes appended by produces, and served to consumers' fetches (not to
    /// followers'), since this process opened the partition.
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
}

impl Partition {
    pub fn open(
        id: PartitionId<'_>,
        dir: PathBuf,
        config: PartitionConfig,
        leader_epoch: i32,
        now_ms: i64,
        files: &Arc<FileCache>,
    ) -> Result<Partition, PartitionError> {
        let PartitionId { topic, topic_id, index } = id;
        let log = PartitionLog::open_with_files(&dir, config.log.clone(), now_ms, Arc::clone(files))?;
        let headers = log.batch_headers_from(log.log_start_offset())?;
        let producers = ProducerStateTable::rebuild(headers.iter());
        let leo = log.log_end_offset();
        Ok(Partition {
            topic: topic.to_owned(),
            topic_id,
            index,
            state: Mutex::new(PartitionState {
                log,
                config,
                leader_epoch,
                role: Role::Leader,
                isr: IsrState::single(-1, leo),
                follower_high_watermark: leo,
                high_watermark_known: false,
                checkpointed_high_watermark: None,
                partition_epoch: -1,
                isr_change_in_flight: None,
                unsent_isr_proposal: None,
                producers,
                flushed_through: leo,
                deleted: false,
                metadata_isr: Vec::new(),
                metadata_replicas: Vec::new(),
                metadata_eligible: Vec::new(),
                moves: 0,
                log_dir_offline: Arc::new(DirHealth::default()),
            }),
            flush_lock: tokio::sync::Mutex::new(()),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
        })
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, PartitionState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn key(&self) -> PartitionKey {
        PartitionKey { topic_id: self.topic_id, index: self.index }
    }

    /// New settings. Returns whether the high watermark moved (a lower
    /// `min.insync.replicas` can release it): the caller wakes what waits on it.
    pub fn set_config(&self, config: PartitionConfig) -> bool {
        let mut s = self.lock();
        if s.config == config {
            return false;
        }
        s.log.set_config(config.log.clone());
        let moved = s.isr.set_min_isr(config.min_insync_replicas).is_some() && s.role == Role::Leader;
        s.config = config;
        moved
    }

    pub fn config(&self) -> PartitionConfig {
        self.lock().config.clone()
    }

    /// The offline flag of the log directory now holding the partition (see
    /// `PartitionState::log_dir_offline`).
    pub fn set_log_dir_flag(&self, flag: Arc<DirHealth>) {
        self.lock().log_dir_offline = flag;
    }

    /// Once its log directory takes writes again (the cause of its failure cleared):
    /// the log is opened again from its files, as at a restart (the tail is checked
    /// batch by batch and anything after the last whole batch is cut off; the producer
    /// state is rebuilt), while the partition keeps its role, leader epoch and ISR. A
    /// failed append was cut back, so the files end where the log did: a log that opens
    /// with another log start or end offset than it had is refused (the directory stays
    /// offline until a restart) rather than served with records lost or changed.
    ///
    /// The files are read without the partition's lock (the directory is offline:
    /// nothing appends, reads are refused); the lock is taken to compare and swap. The
    /// new log counts one truncation more than the old one had, so that a move to
    /// another log directory copying meanwhile copies its files again.
    pub fn reopen_log(&self, now_ms: i64, files: &Arc<FileCache>) -> Result<(), PartitionError> {
        let (dir, config) = {
            let s = self.lock();
            (s.log.dir().to_owned(), s.config.log.clone())
        };
        let mut log = PartitionLog::open_with_files(&dir, config, now_ms, Arc::clone(files))?;
        let headers = log.batch_headers_from(log.log_start_offset())?;
        let producers = ProducerStateTable::rebuild(headers.iter());
        let mut s = self.lock();
        let (before, after) =
            ((s.log.log_start_offset(), s.log.log_end_offset()), (log.log_start_offset(), log.log_end_offset()));
        if before != after || s.log.dir() != dir {
            return Err(PartitionError::Storage(StorageError::Corrupt {
                path: dir,
                reason: format!(
                    "reopened after its log dir failed, the log spans {after:?} instead of {before:?} (log start, log end)"
                ),
            }));
        }
        log.carry_truncations(s.log.truncations() + 1);
        s.producers = producers;
        s.log = log;
        s.flushed_through = s.flushed_through.min(s.log.recovery_point());
        Ok(())
    }

    /// Whether the partition's log directory is offline.
    pub fn log_dir_offline(&self) -> bool {
        self.lock().log_dir_offline.is_offline()
    }

    /// The partition's directory (it changes when the partition moves to another log dir).
    pub fn dir(&self) -> PathBuf {
        self.lock().log.dir().to_owned()
    }

    /// The controller did not commit `proposal`, made in `partition_epoch`, as it said at
    /// `now`: unless the metadata has moved on meanwhile, it is forgotten, kept or sent
    /// again as `why` says (see [`NotCommitted`]); a refused addition can leave a new one
    /// to send (see [`super::isr::IsrState::expansion_refused`]). Returns the new high
    /// watermark if it moved.
    pub fn isr_proposal_not_committed(
        &self,
        partition_epoch: i32,
        proposal: &super::isr::IsrProposal,
        why: NotCommitted,
        now_ms: i64,
    ) -> Option<i64> {
        let mut s = self.lock();
        if s.partition_epoch != partition_epoch || s.isr_change_in_flight.as_ref() != Some(proposal) {
            return None;
        }
        match why {
            NotCommitted::Stale => return None,
            NotCommitted::NoAnswer => {
                s.unsent_isr_proposal = Some(proposal.clone());
                return None;
            }
            NotCommitted::NotAttempted => {}
        }
        s.isr_change_in_flight = None;
        match proposal {
            super::isr::IsrProposal::Expand { add, broker_epoch } => {
                let (high_watermark, again) = s.isr.expansion_refused(*add, *broker_epoch, now_ms);
                s.note_proposal(again);
                high_watermark
            }
            super::isr::IsrProposal::Shrink { .. } => None,
        }
    }

    /// Leadership as the metadata gives it: this broker leads `pi.replicas` with `pi.isr`
    /// in sync, in `pi.leader_epoch`. A new ISR keeps what is known of the followers; a
    /// new set of replicas starts a new leadership (followers get a full lag window).
    /// Returns the new high watermark if it moved.
    pub fn set_leadership(&self, pi: &PartitionImage, lag_time_max_ms: i64, now_ms: i64) -> Option<i64> {
        let mut s = self.lock();
        let leo = s.log.log_end_offset();
        let hw = s.known_high_watermark();
        // (Before the first role the partition is a provisional leader of no one: -1.)
        let was_leader_in_epoch =
            s.role == Role::Leader && s.leader_epoch == pi.leader_epoch && s.isr.leader() == pi.leader;
        let same_leadership = was_leader_in_epoch && s.isr.has_replicas(pi.leader, &pi.replicas);
        // (The ISR moves only with the partition epoch; either is taken as a new one.)
        let new_epoch = s.partition_epoch != pi.partition_epoch || s.metadata_isr != pi.isr;
        s.role = Role::Leader;
        s.leader_epoch = pi.leader_epoch;
        s.partition_epoch = pi.partition_epoch;
        s.metadata_isr.clone_from(&pi.isr);
        s.metadata_replicas.clone_from(&pi.replicas);
        s.metadata_eligible = eligible_of(pi);
        if new_epoch || !same_leadership {
            // A new partition epoch answers what was proposed in the last one.
            s.isr_change_in_flight = None;
            s.unsent_isr_proposal = None;
        }
        if same_leadership {
            if new_epoch {
                s.isr.set_isr(&pi.isr);
            }
        } else {
            let min_isr = s.config.min_insync_replicas;
            let before = std::mem::replace(
                &mut s.isr,
                IsrState::new(pi.leader, &pi.replicas, &pi.isr, leo, hw, lag_time_max_ms, min_isr, now_ms),
            );
            if was_leader_in_epoch {
                s.isr.keep_epoch_start(&before);
            }
        }
        (s.isr.high_watermark() != hw).then(|| s.isr.high_watermark())
    }

    /// The settings a produce is checked against, refusing an acks=all write while the
    /// ISR is smaller than the effective `min.insync.replicas` (Kafka checks this at
    /// append time, under the same lock that guards the ISR).
    pub fn produce_config(&self, acks_all: bool) -> Result<PartitionConfig, PartitionError> {
        let s = self.lock();
        if s.role != Role::Leader {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        if acks_all {
            if let Some((isr, min_isr)) = s.isr.under_min_isr() {
                return Err(PartitionError::NotEnoughReplicas { isr, min_isr });
            }
        }
        Ok(s.config.clone())
    }

    /// After an acks=all write was replicated to the ISR: whether that ISR still meets
    /// the effective `min.insync.replicas`. If it shrank below it meanwhile, the write is
    /// in the log but not as durable as asked: NOT_ENOUGH_REPLICAS_AFTER_APPEND, as
    /// Kafka's DelayedProduce answers (the producer retries; idempotence keeps one copy).
    pub fn check_min_isr_after_append(&self) -> Result<(), PartitionError> {
        match self.lock().isr.under_min_isr() {
            Some((isr, min_isr)) => Err(PartitionError::NotEnoughReplicasAfterAppend { isr, min_isr }),
            None => Ok(()),
        }
    }

    /// A follower fetched from `offset` (its log end offset), with no broker epoch.
    /// Returns the new high watermark if it moved; the caller wakes what waits on it.
    pub fn follower_fetched(&self, replica: i32, offset: i64, now_ms: i64) -> Option<i64> {
        let mut s = self.lock();
        if s.role != Role::Leader {
            return None;
        }
        let (moved, proposal) = s.isr.on_follower_fetch(replica, offset, NO_BROKER_EPOCH, now_ms);
        s.note_proposal(proposal);
        moved
    }

    pub fn leader_epoch(&self) -> i32 {
        self.lock().leader_epoch
    }

    /// After open, before the first role: the high watermark the log directory's
    /// checkpoint recorded for this partition.
    pub fn restore_high_watermark(&self, hw: i64) {
        let mut s = self.lock();
        if !s.high_watermark_known {
            s.checkpointed_high_watermark = Some(hw);
        }
    }

    /// The high watermark to checkpoint: the current one once the partition has a role;
    /// before that, what it would start from (never the provisional leader's log end).
    pub fn high_watermark_to_checkpoint(&self) -> i64 {
        self.lock().settled_high_watermark()
    }

    /// The idempotent producers this replica keeps state for (DescribeProducers).
    pub fn active_producers(&self) -> Vec<ActiveProducer> {
        self.lock().producers.active_producers()
    }

    /// Append a Produce request's validated records for this partition: all batches or
    /// none. The records are stamped in place (offsets, leader epoch, append time).
    pub fn append(&self, records: &mut ValidatedRecords, now_ms: i64) -> Result<AppendResult, PartitionError> {
        let (headers, records) = records.parts_mut();
        let mut s = self.lock();
        if s.role != Role::Leader {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        s.check_online()?;
        // Sequence checks against a scratch copy so a rejected request changes nothing.
        let mut duplicate = None;
        for h in headers {
            match s.producers.check(h) {
                SequenceCheck::Append => {}
                SequenceCheck::Duplicate(rec) => duplicate = Some(rec),
                SequenceCheck::OutOfOrder { expected, got } => {
                    return Err(PartitionError::OutOfOrderSequence { expected, got })
                }
                SequenceCheck::InvalidEpoch { current, got } => {
                    return Err(PartitionError::InvalidProducerEpoch { current, got })
                }
            }
        }
        if let Some(rec) = duplicate {
            if headers.len() == 1 {
                return Ok(AppendResult {
                    base_offset: rec.base_offset,
                    last_offset: rec.last_offset,
                    log_start_offset: s.log.log_start_offset(),
                    log_append_time: -1,
                });
            }
        }
        let mut log_append_time = -1;
        if s.config.log_append_time {
            log_append_time = now_ms;
            let mut pos = 0;
            for h in headers {
                let len = h.total_len();
                crate::storage::set_log_append_time(&mut records[pos..pos + len], now_ms);
                pos += len;
            }
        }
        let epoch = s.leader_epoch;
        let info = s.log.append(records, epoch, now_ms).map_err(|e| s.on_storage_error(self, e))?;
        let mut offset = info.base_offset;
        for h in headers {
            let count = i64::from(h.last_offset_delta) + 1;
            s.producers.record(h, offset, offset + count - 1);
            offset += count;
        }
        let leo = s.log.log_end_offset();
        s.isr.on_leader_append(leo);
        self.bytes_in.fetch_add(records.len() as u64, Ordering::Relaxed);
        Ok(AppendResult {
            base_offset: info.base_offset,
            last_offset: info.last_offset,
            log_start_offset: info.log_start_offset,
            log_append_time,
        })
    }

    /// fsyncs everything through `offset`, on a blocking thread and without the
    /// partition lock, so appends and reads go on meanwhile. Group commit: one fsync
    /// covers every append made before it started, and callers queued behind it find
    /// their offset covered and return without another.
    pub async fn flush_through(&self, offset: i64) -> Result<(), PartitionError> {
        let _one_at_a_time = self.flush_lock.lock().await;
        let handle = {
            let s = self.lock();
            if s.flushed_through > offset {
                return Ok(());
            }
            s.log.unflushed_handle()?
        };
        let Some((file, log_end_offset)) = handle else {
            // Everything is already below the recovery point (flushed by a roll or by
            // the flush.messages / flush.ms policy).
            let mut s = self.lock();
            s.flushed_through = s.flushed_through.max(s.log.recovery_point());
            return Ok(());
        };
        let synced = tokio::task::spawn_blocking(move || {
            crate::metrics::timed_fsync(|| file.sync_data()).map_err(crate::storage::fsync_failed)
        })
        .await
        .map_err(|e| PartitionError::FlushFailed(std::io::Error::other(e.to_string())))?;
        if let Err(e) = synced {
            let s = self.lock();
            s.take_log_dir_offline(self, &e);
            return Err(PartitionError::FlushFailed(e));
        }
        let mut s = self.lock();
        s.log.mark_flushed(log_end_offset);
        s.flushed_through = s.flushed_through.max(log_end_offset);
        Ok(())
    }

    /// Everything below this offset is on disk.
    pub fn flushed_through(&self) -> i64 {
        self.lock().flushed_through
    }

    /// Records from `offset` up to the log end offset, past the high watermark: what a
    /// coordinator that just became leader loads. Kafka's loader reads to the log end:
    /// a new leader's high watermark trails the records its predecessor had committed,
    /// and its log (not its high watermark) is what the partition now holds.
    pub fn read_to_log_end(&self, offset: i64, max_bytes: usize) -> Result<LogSlices, PartitionError> {
        let s = self.lock();
        let log_end = s.log.log_end_offset();
        Ok(s.log.read_slices(offset, max_bytes, log_end)?)
    }

    /// A consumer's read from the leader: up to the high watermark.
    pub fn fetch(&self, offset: i64, max_bytes: usize) -> Result<FetchResult, PartitionError> {
        self.consumer_read(offset, max_bytes, true)
    }

    /// A consumer's read from whichever replica this is (KIP-392, Fetch v11+): a follower
    /// serves up to its own high watermark, which trails the leader's by a fetch.
    pub fn fetch_from_any_replica(&self, offset: i64, max_bytes: usize) -> Result<FetchResult, PartitionError> {
        self.consumer_read(offset, max_bytes, false)
    }

    fn consumer_read(&self, offset: i64, max_bytes: usize, leader_only: bool) -> Result<FetchResult, PartitionError> {
        let s = self.lock();
        if s.deleted || (leader_only && s.role != Role::Leader) {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        s.check_online()?;
        let hw = s.high_watermark();
        let records = s.log.read_slices(offset, max_bytes, hw).map_err(|e| s.on_storage_error(self, e))?;
        self.bytes_out.fetch_add(records.len() as u64, Ordering::Relaxed);
        Ok(FetchResult {
            records,
            high_watermark: hw,
            log_start_offset: s.log.log_start_offset(),
            last_stable_offset: hw,
        })
    }

    pub fn high_watermark(&self) -> i64 {
        self.lock().high_watermark()
    }

    /// KIP-392, on a leader: the follower a consumer in `client_rack` reading from
    /// `fetch_offset` should read from instead (`replica_selector::rack_aware`), or `None`.
    /// `rack_of` gives a live broker's rack (`Some(None)`: live, no rack; `None`: not
    /// live or unknown, never chosen).
    pub fn preferred_read_replica(
        &self,
        client_rack: &str,
        fetch_offset: i64,
        now_ms: i64,
        rack_of: impl Fn(i32) -> Option<Option<String>>,
    ) -> Option<i32> {
        use super::replica_selector::{rack_aware, ReplicaView};
        if client_rack.is_empty() {
            return None;
        }
        let (leader_id, leader_leo, candidates) = {
            let s = self.lock();
            if s.role != Role::Leader || s.deleted {
                return None;
            }
            (s.isr.leader(), s.isr.leader_log_end_offset(), s.isr.read_candidates(fetch_offset, now_ms))
        };
        let leader = ReplicaView {
            id: leader_id,
            rack: rack_of(leader_id).flatten(),
            log_end_offset: leader_leo,
            since_caught_up_ms: 0,
        };
        let views: Vec<ReplicaView> = candidates
            .into_iter()
            .filter_map(|(id, log_end_offset, since_caught_up_ms)| {
                Some(ReplicaView { id, rack: rack_of(id)?, log_end_offset, since_caught_up_ms })
            })
            .collect();
        rack_aware(client_rack, &leader, &views)
    }

    pub fn role(&self) -> Role {
        self.lock().role
    }

    pub fn is_leader(&self) -> bool {
        self.role() == Role::Leader
    }

    pub fn log_start_offset(&self) -> i64 {
        self.lock().log.log_start_offset()
    }

    pub fn log_end_offset(&self) -> i64 {
        self.lock().log.log_end_offset()
    }

    /// (offset, timestamp) of the first record with timestamp >= `ts`, below the HW.
    pub fn offset_for_timestamp(&self, ts: i64) -> Result<Option<(i64, i64)>, PartitionError> {
        let s = self.lock();
        Ok(s.log.offset_for_timestamp(ts)?.filter(|(o, _)| *o < s.high_watermark()))
    }

    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        let s = self.lock();
        s.log.max_timestamp().filter(|(_, o)| *o < s.high_watermark())
    }

    /// DeleteRecords: advance the log start offset. `-1` means the high watermark.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64, PartitionError> {
        let mut s = self.lock();
        // Kafka refuses this for compacted-only topics before looking at the offset.
        if !s.log.config().cleanup_delete {
            return Err(PartitionError::DeleteNotAllowed);
        }
        if s.role != Role::Leader {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        let hw = s.isr.high_watermark();
        let target = if offset == -1 { hw } else { offset };
        if target < 0 || target > hw {
            return Err(PartitionError::OffsetBeyondHighWatermark { offset: target, high_watermark: hw });
        }
        Ok(s.log.delete_records_before(target)?)
    }

    pub fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        self.lock().end_offset_for_epoch(epoch)
    }

    pub fn enforce_retention(&self, now_ms: i64) -> Result<usize, PartitionError> {
        Ok(self.lock().log.enforce_retention(now_ms)?)
    }

    /// One log cleaner pass (compacted topics only). The partition is locked only to plan
    /// the pass and to swap the cleaned segments in, not while they are written.
    pub fn clean(&self, now_ms: i64) -> Result<Option<CleanStats>, PartitionError> {
        let Some((prepared, moves)) = self.prepare_clean(now_ms)? else { return Ok(None) };
        self.finish_clean(prepared, moves)
    }

    /// Plans under the lock, then writes the cleaned segments without it.
    fn prepare_clean(&self, now_ms: i64) -> Result<Option<(PreparedClean, u64)>, PartitionError> {
        let (plan, moves) = {
            let s = self.lock();
            if s.deleted {
                return Ok(None);
            }
            (s.log.plan_clean(now_ms), s.moves)
        };
        let Some(plan) = plan else { return Ok(None) };
        Ok(Some((plan.prepare(now_ms)?, moves)))
    }

    /// Swaps the cleaned segments in, unless the topic was deleted or the partition moved
    /// to another log directory meanwhile (the output is in the old one).
    fn finish_clean(&self, prepared: PreparedClean, moves: u64) -> Result<Option<CleanStats>, PartitionError> {
        let mut s = self.lock();
        if s.deleted || s.moves != moves {
            prepared.discard();
            return Ok(None);
        }
        Ok(Some(s.log.finish_clean(prepared)?))
    }

    /// Marks the partition deleted before its directory is removed (see `clean`).
    pub fn mark_deleted(&self) {
        self.lock().deleted = true;
    }

    pub fn is_deleted(&self) -> bool {
        self.lock().deleted
    }

    pub fn size_bytes(&self) -> u64 {
        self.lock().log.size_bytes()
    }

    /// The log's size in bytes and its number of segments.
    pub fn log_size_and_segments(&self) -> (u64, usize) {
        let s = self.lock();
        (s.log.size_bytes(), s.log.segment_count())
    }

    /// Record bytes produced to and consumed from this partition: `(in, out)`.
    pub fn traffic(&self) -> (u64, u64) {
        (self.bytes_in.load(Ordering::Relaxed), self.bytes_out.load(Ordering::Relaxed))
    }

    /// The ISR and the replicas as the last applied metadata gave them (empty before the
    /// first).
    /// The ISR, the replicas and the eligible leaders (ELR and last known leader) of the
    /// last applied metadata (all empty before the first).
    pub fn metadata_isr_replicas_and_eligible(&self) -> (Vec<i32>, Vec<i32>, Vec<i32>) {
        let s = self.lock();
        (s.metadata_isr.clone(), s.metadata_replicas.clone(), s.metadata_eligible.clone())
    }

    /// Whether [`Self::flush`] has anything to write.
    pub fn needs_flush(&self) -> bool {
        self.lock().log.needs_flush()
    }

    /// Flush and close the log (graceful shutdown).
    pub fn flush(&self) -> Result<(), PartitionError> {
        let mut s = self.lock();
        s.log.flush()?;
        s.flushed_through = s.log.log_end_offset();
        Ok(())
    }
}

impl PartitionState {
    fn check_online(&self) -> Result<(), PartitionError> {
        if self.log_dir_offline.is_offline() {
            Err(PartitionError::LogDirOffline)
        } else {
            Ok(())
        }
    }

    /// An I/O error of the log (disk full, read-only, removed): the whole log directory
    /// goes offline, as Kafka's LogDirFailureChannel takes it; other errors pass through.
    fn on_storage_error(&self, p: &Partition, e: StorageError) -> PartitionError {
        if let StorageError::Io(io) = &e {
            self.take_log_dir_offline(p, io);
        }
        PartitionError::Storage(e)
    }

    fn take_log_dir_offline(&self, p: &Partition, e: &std::io::Error) {
        if crate::storage::is_resource_shortage(e) {
            // The process's shortage, not the disk's: the directory stays online and the
            // request fails with an error the client retries.
            let n = crate::metrics::storage_resource_shortage();
            if n.is_power_of_two() {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e, shortages = n,
                    "the process ran short of descriptors or memory in a log operation; the log dir stays online (see storage_resource_shortages_total)");
            }
            return;
        }
        if self.log_dir_offline.fail(e) {
            let dir = self.log.dir().parent().map(|d| d.display().to_string()).unwrap_or_default();
            let recovers = if self.log_dir_offline.can_recover() {
                "it is probed and comes back once it takes writes again"
            } else {
                "it stays offline until the broker is restarted"
            };
            tracing::error!(log_dir = %dir, topic = %p.topic, partition = p.index, error = %e,
                "I/O error in a log dir: taking it offline; its partitions answer KAFKA_STORAGE_ERROR, the other dirs keep serving; {recovers}");
        }
    }

    fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        let leo = self.log.log_end_offset();
        match self.log.end_offset_for_epoch(epoch) {
            Some(found) => Some(found),
            // Nothing appended yet in any epoch: the current epoch ends at the LEO.
            None if self.log.latest_epoch().is_none() && epoch >= self.leader_epoch => Some((self.leader_epoch, leo)),
            None => None,
        }
    }

    /// Kafka's check of a request's `current_leader_epoch` (-1: none given).
    fn check_leader_epoch(&self, current_leader_epoch: i32) -> Result<(), PartitionError> {
        let epoch = self.leader_epoch;
        if current_leader_epoch < 0 || current_leader_epoch == epoch {
            Ok(())
        } else if current_leader_epoch > epoch {
            Err(PartitionError::UnknownLeaderEpoch { request: current_leader_epoch, current: epoch })
        } else {
            Err(PartitionError::FencedLeaderEpoch { request: current_leader_epoch, current: epoch })
        }
    }

    /// The high watermark a new role starts from (see `high_watermark_known`).
    fn known_high_watermark(&mut self) -> i64 {
        let hw = self.settled_high_watermark();
        self.high_watermark_known = true;
        hw
    }

    /// The high watermark once a role has set it, before that the recovered one (never
    /// the provisional value a partition has before its first role).
    fn settled_high_watermark(&self) -> i64 {
        if self.high_watermark_known {
            self.high_watermark()
        } else {
            self.recovered_high_watermark()
        }
    }

    /// Before the first role: the checkpointed high watermark within the log as it
    /// opened (a crash may have lost unflushed records below it, retention may have
    /// moved the start past it), or the log start offset.
    fn recovered_high_watermark(&self) -> i64 {
        let start = self.log.log_start_offset();
        self.checkpointed_high_watermark.map_or(start, |hw| hw.clamp(start, self.log.log_end_offset()))
    }

    fn high_watermark(&self) -> i64 {
        match self.role {
            Role::Leader => self.isr.high_watermark(),
            Role::Follower { .. } => self.follower_high_watermark,
        }
    }

    /// Keeps `proposal` to be sent, unless a proposal is in flight. A follower proposed
    /// for the ISR holds the high watermark back from now until the answer.
    fn note_proposal(&mut self, proposal: Option<super::isr::IsrProposal>) {
        let Some(proposal) = proposal else { return };
        if self.isr_change_in_flight.is_some() {
            return;
        }
        if let super::isr::IsrProposal::Expand { add, .. } = proposal {
            self.isr.expanding(add);
        }
        self.isr_change_in_flight = Some(proposal.clone());
        self.unsent_isr_proposal = Some(proposal);
    }
}

mod log_move;
pub use log_move::MovePaused;
mod replica;
pub use replica::{FetchApplied, FollowerFetchState, ReplicaRead};

/// The replicas `pi` lets lead cleanly from outside its ISR (KIP-966).
fn eligible_of(pi: &PartitionImage) -> Vec<i32> {
    pi.elr.iter().chain(&pi.last_known_elr).copied().collect()
}

#[cfg(test)]
mod tests;
