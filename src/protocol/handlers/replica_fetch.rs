//! Fetch from a follower broker (`replica_id` ≥ 0, or `ReplicaState.replica_id` from
//! v15): translated for [`ReplicaManager::fetch_for_replica`], which reads to the log end
//! offset, answers a diverging epoch (v12+) and records the follower's position.
//!
//! [`ReplicaManager::fetch_for_replica`]: crate::replication::ReplicaManager::fetch_for_replica

use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{EpochEndOffset, FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};

use super::str_bytes;
use crate::protocol::errors::partition_error;
use crate::protocol::fetch_encoding::FetchReply;
use crate::protocol::Ctx;
use crate::replication::{PartitionFetch, ReplicaFetchRequest};
use crate::storage::{LogSlices, StorageError};

/// Replica fetches wait at most this long, whatever the follower asks.
const MAX_WAIT_CAP_MS: i32 = 30_000;

/// The follower's id, when the request comes from one.
pub fn replica_id(req: &FetchRequest, version: i16) -> i32 {
    if version >= 15 {
        req.replica_state.replica_id.0
    } else {
        req.replica_id.0
    }
}

pub async fn handle(ctx: &Ctx, req: FetchRequest, version: i16, replica_id: i32) -> FetchReply {
    let image = ctx.image();
    let mut domain = ReplicaFetchRequest {
        replica_id,
        replica_epoch: req.replica_state.replica_epoch,
        max_wait: Duration::from_millis(req.max_wait_ms.clamp(0, MAX_WAIT_CAP_MS) as u64),
        min_bytes: req.min_bytes.max(0) as usize,
        max_bytes: req.max_bytes.max(0) as usize,
        partitions: Vec::new(),
    };
    // Per topic of the request: its name, and per partition the index of its entry in
    // `domain.partitions`, or the error that answers it.
    let mut layout = Vec::with_capacity(req.topics.len());
    for ft in &req.topics {
        let topic = if version >= 13 { image.topic_by_id(&ft.topic_id) } else { image.topic(ft.topic.0.as_str()) };
        let missing =
            if version >= 13 { ResponseError::UnknownTopicId } else { ResponseError::UnknownTopicOrPartition };
        let name = match (version >= 13, topic) {
            (true, Some(t)) => TopicName(str_bytes(t.name.clone())),
            _ => ft.topic.clone(),
        };
        let mut slots = Vec::with_capacity(ft.partitions.len());
        for fp in &ft.partitions {
            let Some(t) = topic else {
                slots.push((fp.partition, Err(missing)));
                continue;
            };
            slots.push((fp.partition, Ok(domain.partitions.len())));
            domain.partitions.push(PartitionFetch {
                topic: t.name.clone(),
                topic_id: t.topic_id,
                partition: fp.partition,
                current_leader_epoch: fp.current_leader_epoch,
                fetch_offset: fp.fetch_offset,
                last_fetched_epoch: (version >= 12 && fp.last_fetched_epoch >= 0).then_some(fp.last_fetched_epoch),
                log_start_offset: fp.log_start_offset,
                max_bytes: fp.partition_max_bytes.max(0) as usize,
            });
        }
        layout.push((name, ft.topic_id, slots));
    }
    let mut reads =
        ctx.replicas.fetch_for_replica(&domain, ctx.now_ms()).await.into_iter().map(Some).collect::<Vec<_>>();
    let mut responses = Vec::with_capacity(layout.len());
    let mut records = Vec::with_capacity(layout.len());
    for (name, topic_id, slots) in layout {
        let mut parts = Vec::with_capacity(slots.len());
        let mut slices = Vec::with_capacity(slots.len());
        for (index, slot) in slots {
            let read = slot.map(|i| reads[i].take().expect("each read is taken once"));
            let (data, bytes) = match read {
                Err(e) => (error_data(index, e, -1, -1), LogSlices::default()),
                Ok(r) => match r.result {
                    Ok(read) => {
                        let mut d = PartitionData::default()
                            .with_partition_index(index)
                            .with_high_watermark(read.high_watermark)
                            .with_last_stable_offset(read.high_watermark)
                            .with_log_start_offset(read.log_start_offset)
                            .with_records(Some(Default::default()));
                        if let (true, Some((epoch, end_offset))) = (version >= 12, read.diverging_epoch) {
                            d.diverging_epoch = EpochEndOffset::default().with_epoch(epoch).with_end_offset(end_offset);
                        }
                        (d, read.records)
                    }
                    Err(e) => {
                        // OFFSET_OUT_OF_RANGE says where the leader's log starts, so the
                        // follower can start over there.
                        let (hw, start) = match (&e, &r.partition) {
                            (
                                crate::replication::PartitionError::Storage(StorageError::OffsetOutOfRange { .. }),
                                Some(p),
                            ) => (p.high_watermark(), p.log_start_offset()),
                            _ => (-1, -1),
                        };
                        (error_data(index, partition_error(&e), hw, start), LogSlices::default())
                    }
                },
            };
            parts.push(data);
            slices.push(bytes);
        }
        responses
            .push(FetchableTopicResponse::default().with_topic(name).with_topic_id(topic_id).with_partitions(parts));
        records.push(slices);
    }
    let response = FetchResponse::default().with_responses(responses).with_session_id(0);
    FetchReply { response, records }
}

fn error_data(index: i32, e: ResponseError, high_watermark: i64, log_start_offset: i64) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(e.code())
        .with_high_watermark(high_watermark)
        .with_last_stable_offset(high_watermark)
        .with_log_start_offset(log_start_offset)
        .with_records(Some(Default::default()))
}
