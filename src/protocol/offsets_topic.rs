//! `__consumer_offsets`: the coordinator's records stored as an ordinary (internal,
//! compacted) topic of `offsets_topic_num_partitions` partitions (50, as Kafka's) in
//! runnel's own log. This is glue: create the topic, load and unload the coordinator's
//! partitions as their leadership moves, append each decision's batch to its group's
//! partition through the replica manager. The record formats are the coordinator's
//! (`coordinator::offsets_codec`).

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::Ctx;
use crate::controller::{ControllerError, MetadataImage, NewTopic};
use crate::coordinator::group_partition;
use crate::coordinator::offsets_codec::{self, OffsetsRecord};
use crate::coordinator::writer::{AppendFuture, OffsetsWriteError, OffsetsWriter};
use crate::replication::{Acks, Partition, PartitionError, ProduceLimits, ValidatedRecords};

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Kafka's `offsets.commit.timeout.ms` default: how long a coordinator write may wait for
/// its commit before the members get an error.
const OFFSETS_COMMIT_TIMEOUT: Duration = Duration::from_millis(5_000);

/// A partition with less log than this replays in the caller when this broker takes its
/// leadership (a new, empty one always); a bigger one replays on a blocking thread while
/// its groups answer COORDINATOR_LOAD_IN_PROGRESS, as Kafka's do.
const INLINE_LOAD_BYTES: u64 = 64 * 1024;

/// How many partitions `__consumer_offsets` has: the topic's own count once it exists (an
/// existing log keeps its groups where they are, as Kafka's
/// `getTopicPartitionCount(...).getOrElse(config)`), else `offsets_topic_num_partitions`.
pub fn partition_count(ctx: &Ctx, image: &MetadataImage) -> i32 {
    image.topic(OFFSETS_TOPIC).map_or(ctx.config.offsets_topic_num_partitions, |t| t.partitions.len() as i32)
}

/// The broker coordinating `group_id`: the leader of the group's partition of
/// `__consumer_offsets`, if it has a live one.
pub fn coordinator_node(image: &MetadataImage, group_id: &str) -> Option<i32> {
    let topic = image.topic(OFFSETS_TOPIC)?;
    let partition = group_partition::partition_for(group_id, topic.partitions.len() as i32);
    let leader = topic.partitions.get(partition as usize)?.leader;
    (leader >= 0 && image.broker_alive(leader)).then_some(leader)
}

/// The partitions of `__consumer_offsets` this broker should coordinate now, with their
/// leader epochs: those the image names it leader of and whose local partition has taken
/// the leadership (until then its follower fetcher may still append what the previous
/// leader had).
fn led_partitions(ctx: &Ctx, image: &MetadataImage) -> Vec<(i32, i32, Arc<Partition>)> {
    let Some(topic) = image.topic(OFFSETS_TOPIC) else { return vec![] };
    topic
        .partitions
        .iter()
        .filter(|p| p.leader == ctx.config.node_id)
        .filter_map(|p| {
            let local = ctx.replicas.partition(&topic.topic_id, p.partition)?;
            local.is_leader().then(|| (p.partition, local.leader_epoch(), local))
        })
        .collect()
}

/// Load and unload the coordinator's partitions as this broker gains and loses their
/// leadership (Kafka's `onElection`/`onResignation`). Called before each group request,
/// after FindCoordinator creates the topic, and on the group clock. A small partition
/// loads at once; a big one on a blocking thread (`background`), else here.
fn follow_leadership(ctx: &Ctx, background: bool) {
    let in_step = |image: &MetadataImage, led: &[(i32, i32, Arc<Partition>)]| {
        let wanted: Vec<(i32, i32)> = led.iter().map(|(p, e, _)| (*p, *e)).collect();
        partition_count(ctx, image) == ctx.groups.partition_count() && wanted == ctx.groups.owned_partitions()
    };
    let image = ctx.image();
    if in_step(&image, &led_partitions(ctx, &image)) {
        return;
    }
    let _switch = ctx.coordinator_switch.lock().unwrap_or_else(|e| e.into_inner());
    // Looked at again under the lock: another caller may have followed a newer image.
    let image = ctx.image();
    let led = led_partitions(ctx, &image);
    if in_step(&image, &led) {
        return;
    }
    let wanted: Vec<i32> = led.iter().map(|(p, _, _)| *p).collect();
    ctx.groups.set_partition_count(partition_count(ctx, &image));
    for (partition, _) in ctx.groups.owned_partitions() {
        if !wanted.contains(&partition) {
            ctx.groups.on_resignation(partition);
        }
    }
    for (partition, leader_epoch, local) in led {
        let Some(load) = ctx.groups.on_election(partition, leader_epoch) else { continue };
        if !background || local.size_bytes() < INLINE_LOAD_BYTES {
            ctx.groups.complete_load(load, read_partition(&local), ctx.now_ms());
            continue;
        }
        tracing::info!(partition, leader_epoch, bytes = local.size_bytes(), "loading __consumer_offsets partition");
        let (groups, clock) = (Arc::clone(&ctx.groups), ctx.clock.clone());
        tokio::task::spawn_blocking(move || {
            let records = read_partition(&local);
            groups.complete_load(load, records, clock());
        });
    }
}

/// See [`follow_leadership`]; big partitions load in the background.
pub fn refresh_coordinator(ctx: &Ctx) {
    follow_leadership(ctx, true);
}

/// At start: every partition this broker leads is loaded before it serves clients.
pub fn load_coordinator(ctx: &Ctx) {
    follow_leadership(ctx, false);
}

/// Before a group request: a single node creates `__consumer_offsets` if it is missing
/// (a client may commit or join before it ever asked FindCoordinator), then the
/// coordinator follows the partitions' leadership. A cluster leaves the creation to
/// FindCoordinator, as Kafka does: until then a group has no coordinator.
pub async fn prepare_group_request(ctx: &Ctx) {
    if !ctx.controller.is_clustered() && ctx.image().topic(OFFSETS_TOPIC).is_none() {
        if let Err(e) = ensure_topic_exists(ctx).await {
            tracing::error!(error = %e, "cannot create __consumer_offsets");
        }
    }
    refresh_coordinator(ctx);
}

/// Create `__consumer_offsets` if it does not exist yet: `offsets_topic_num_partitions`
/// partitions, each on up to `offsets_topic_replication_factor` live brokers.
pub async fn ensure_topic_exists(ctx: &Ctx) -> Result<(), String> {
    let image = ctx.image();
    if image.topic(OFFSETS_TOPIC).is_none() {
        let live = image.brokers.values().filter(|b| !b.fenced).count();
        let rf = ctx.config.offsets_topic_replication_factor.min(live.max(1) as i16);
        let req = NewTopic {
            name: OFFSETS_TOPIC.to_owned(),
            num_partitions: ctx.config.offsets_topic_num_partitions,
            replication_factor: rf,
            assignments: vec![],
            configs: vec![
                ("cleanup.policy".into(), Some("compact".into())),
                ("segment.bytes".into(), Some(ctx.config.offsets_topic_segment_bytes.to_string())),
            ],
        };
        match ctx.controller_op(ctx.controller.create_topic(&req, false)).await {
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

    async fn write(&self, partition: i32, records: &[OffsetsRecord]) -> Result<(), OffsetsWriteError> {
        let ctx = self.ctx.upgrade().ok_or(OffsetsWriteError::Unavailable)?;
        let topic_id = ctx.image().topic(OFFSETS_TOPIC).map(|t| t.topic_id);
        let Some(partition) = topic_id.and_then(|id| ctx.replicas.partition(&id, partition)) else {
            tracing::error!(partition, "no __consumer_offsets partition to write to");
            return Err(OffsetsWriteError::NotCoordinator);
        };
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
        PartitionError::NotEnoughReplicas { .. }
        | PartitionError::NotEnoughReplicasAfterAppend { .. }
        | PartitionError::ReplicationTimedOut(_) => OffsetsWriteError::Unavailable,
        PartitionError::NotLeaderOrFollower
        | PartitionError::NotAReplica(_)
        | PartitionError::FencedLeaderEpoch { .. } => OffsetsWriteError::NotCoordinator,
        _ => OffsetsWriteError::Storage,
    }
}

impl OffsetsWriter for ConsumerOffsetsWriter {
    fn append<'a>(&'a self, partition: i32, records: &'a [OffsetsRecord]) -> AppendFuture<'a> {
        // Runs when the coordinator awaits the future, outside the coordinator's state lock.
        Box::pin(self.write(partition, records))
    }
}

/// Every record of one partition of `__consumer_offsets`, oldest first.
pub fn read_partition(partition: &Partition) -> Vec<OffsetsRecord> {
    let mut out = Vec::new();
    let mut offset = partition.log_start_offset();
    loop {
        let read = partition.read_to_log_end(offset, 1 << 20).map_err(|e| e.to_string());
        let records = match read.and_then(|d| d.read().map_err(|e| e.to_string())) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, partition = partition.index, offset, "failed to read __consumer_offsets");
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
    out
}
