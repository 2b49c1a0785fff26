//! `__consumer_offsets`: the coordinator's records stored as an ordinary (internal,
//! compacted) topic in runnel's own log. This is glue: find (or create) the partition,
//! append the coordinator's batch through the replica manager, read it back at start. The
//! record formats are the coordinator's (`coordinator::offsets_codec`).

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::Ctx;
use crate::controller::{ControllerError, MetadataImage, NewTopic};
use crate::coordinator::offsets_codec::{self, OffsetsRecord};
use crate::coordinator::writer::{AppendFuture, OffsetsWriteError, OffsetsWriter};
use crate::replication::{Acks, Partition, PartitionError, ProduceLimits, ValidatedRecords};

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Kafka's `offsets.commit.timeout.ms` default: how long a coordinator write may wait for
/// its commit before the members get an error.
const OFFSETS_COMMIT_TIMEOUT: Duration = Duration::from_millis(5_000);

/// Kafka's `offsets.topic.replication.factor` default; runnel caps it at the number of
/// live brokers when the topic is created (one on a single node).
const OFFSETS_TOPIC_REPLICATION_FACTOR: usize = 3;

/// The broker coordinating every group: the leader of `__consumer_offsets` partition 0
/// (one partition for now, where Kafka spreads groups over 50), if it has one.
pub fn coordinator_node(image: &MetadataImage) -> Option<i32> {
    let leader = image.topic(OFFSETS_TOPIC)?.partitions.first()?.leader;
    (leader >= 0 && image.broker_alive(leader)).then_some(leader)
}

/// Whether this broker should serve groups now: it leads `__consumer_offsets` (a single
/// node also before the topic exists; it is created at the first FindCoordinator). The
/// local partition must have taken the leadership too: until then its follower fetcher
/// may still append what the previous leader had.
pub fn should_coordinate(ctx: &Ctx) -> bool {
    let image = ctx.image();
    match image.topic(OFFSETS_TOPIC) {
        None => !ctx.controller.is_clustered(),
        Some(t) => {
            t.partitions.first().is_some_and(|p| p.leader == ctx.config.node_id)
                && ctx.replicas.partition(&t.topic_id, 0).is_some_and(|p| p.is_leader())
        }
    }
}

/// Load or unload the group coordinator when this broker gains or loses the leadership
/// of `__consumer_offsets` (called before each group request and on the group clock).
/// Returns whether it coordinates.
pub fn refresh_coordinator(ctx: &Ctx) -> bool {
    let want = should_coordinate(ctx);
    if want == ctx.groups.is_active() {
        return want;
    }
    let _switch = ctx.coordinator_switch.lock().unwrap_or_else(|e| e.into_inner());
    if want != ctx.groups.is_active() {
        if want {
            ctx.groups.activate(read_all(ctx), ctx.now_ms());
        } else {
            ctx.groups.deactivate();
        }
    }
    want
}

/// Create `__consumer_offsets` if it does not exist yet; its partition 0 when this
/// broker leads it. Creating it is a controller round trip, run off the async workers.
pub async fn ensure_topic(ctx: &Ctx) -> Result<Arc<Partition>, String> {
    ensure_topic_exists(ctx).await?;
    let topic = ctx.image().topic(OFFSETS_TOPIC).cloned().ok_or("offsets topic missing")?;
    ctx.replicas.partition(&topic.topic_id, 0).ok_or_else(|| "offsets partition not on this broker".to_owned())
}

/// Create `__consumer_offsets` if it does not exist yet, replicated on up to three live
/// brokers.
pub async fn ensure_topic_exists(ctx: &Ctx) -> Result<(), String> {
    let image = ctx.image();
    if image.topic(OFFSETS_TOPIC).is_none() {
        let live = image.brokers.values().filter(|b| !b.fenced).count();
        let rf = OFFSETS_TOPIC_REPLICATION_FACTOR.min(live.max(1)) as i16;
        let req = NewTopic {
            name: OFFSETS_TOPIC.to_owned(),
            num_partitions: 1,
            replication_factor: rf,
            assignments: vec![],
            configs: vec![
                ("cleanup.policy".into(), Some("compact".into())),
                ("segment.bytes".into(), Some(ctx.config.offsets_topic_segment_bytes.to_string())),
            ],
        };
        match ctx.controller_op(move |c| c.create_topic(&req, false)).await {
            Ok(_) | Err(ControllerError::TopicAlreadyExists(_)) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

/// The group coordinator's writer. It holds the broker context weakly: the context owns
/// the coordinator, which owns this writer.
pub struct ConsumerOffsetsWriter {
    ctx: Weak<Ctx>,
}

impl ConsumerOffsetsWriter {
    pub fn new(ctx: Weak<Ctx>) -> ConsumerOffsetsWriter {
        ConsumerOffsetsWriter { ctx }
    }

    async fn write(&self, records: &[OffsetsRecord]) -> Result<(), OffsetsWriteError> {
        let ctx = self.ctx.upgrade().ok_or(OffsetsWriteError::Unavailable)?;
        let partition = ensure_topic(&ctx).await.map_err(|e| {
            tracing::error!(error = %e, "no __consumer_offsets partition to write to");
            OffsetsWriteError::Unavailable
        })?;
        let now = ctx.now_ms();
        let batch = offsets_codec::encode_batch(records, now).map_err(|e| {
            tracing::error!(error = %e, "cannot encode coordinator records");
            OffsetsWriteError::Rejected
        })?;
        let limits = ProduceLimits { max_message_bytes: usize::MAX, timestamps: None, require_keys: false };
        let mut batch = ValidatedRecords::validate(batch, &limits).map_err(|e| {
            tracing::error!(error = %e, "coordinator records fail batch validation");
            OffsetsWriteError::Rejected
        })?;
        let res = ctx.replicas.append_validated(&partition, &mut batch, now).map_err(append_error)?;
        // Committed as Kafka's coordinator writes are (acks=all: the high watermark, and
        // the fsync in fsync mode), waiting in the purgatory like a produce.
        let deadline = Instant::now() + OFFSETS_COMMIT_TIMEOUT;
        ctx.replicas.complete(&partition, res, Acks::All, deadline).await.map_err(append_error)?;
        Ok(())
    }
}

/// Kafka's append errors, as the coordinator runtime sees them: storage failures vs. a
/// batch the log refuses.
fn append_error(e: PartitionError) -> OffsetsWriteError {
    tracing::error!(error = %e, "appending to __consumer_offsets failed");
    match e {
        PartitionError::InvalidBatch(_) => OffsetsWriteError::Rejected,
        PartitionError::NotEnoughReplicas { .. } | PartitionError::ReplicationTimedOut(_) => {
            OffsetsWriteError::Unavailable
        }
        PartitionError::NotLeaderOrFollower
        | PartitionError::NotAReplica(_)
        | PartitionError::FencedLeaderEpoch { .. } => OffsetsWriteError::NotCoordinator,
        _ => OffsetsWriteError::Storage,
    }
}

impl OffsetsWriter for ConsumerOffsetsWriter {
    fn append<'a>(&'a self, records: &'a [OffsetsRecord]) -> AppendFuture<'a> {
        // Runs when the coordinator awaits the future, outside the coordinator's state lock.
        Box::pin(self.write(records))
    }
}

/// Every record of `__consumer_offsets`, oldest first (empty if the topic does not exist).
pub fn read_all(ctx: &Ctx) -> Vec<OffsetsRecord> {
    let Some(topic) = ctx.image().topic(OFFSETS_TOPIC).cloned() else { return vec![] };
    let mut out = Vec::new();
    for partition in topic.partitions.iter().filter_map(|p| ctx.replicas.partition(&topic.topic_id, p.partition)) {
        let mut offset = partition.log_start_offset();
        loop {
            let read = partition.read_to_log_end(offset, 1 << 20).map_err(|e| e.to_string());
            let records = match read.and_then(|d| d.read().map_err(|e| e.to_string())) {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(error = %e, offset, "failed to read __consumer_offsets");
                    break;
                }
            };
            if records.is_empty() {
                break;
            }
            let logged = match offsets_codec::decode_batches(&records) {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!(error = %e, offset, "undecodable batch in __consumer_offsets; stopping replay here");
                    break;
                }
            };
            // Advance past whole batches: the cleaner may have removed a batch's last
            // records, so record offsets alone would fetch that batch again.
            let mut next = crate::storage::batch::split_batches(&records)
                .map_or(offset, |hs| hs.iter().map(|h| h.next_offset()).max().unwrap_or(offset));
            for l in logged {
                next = next.max(l.offset + 1);
                match l.record {
                    Some(rec) => out.push(rec),
                    None => tracing::warn!(offset = l.offset, "skipping unreadable __consumer_offsets record"),
                }
            }
            if next <= offset {
                break;
            }
            offset = next;
        }
    }
    out
}
