//! `__consumer_offsets`: the coordinator's records stored as an ordinary (internal,
//! compacted) topic in runnel's own log.

use bytes::BytesMut;
use indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use super::Ctx;
use crate::config::FlushMode;
use crate::controller::{ControllerError, NewTopic};
use crate::coordinator::offsets::OffsetsRecord;
use crate::coordinator::OffsetsLog;
use crate::replication::{Partition, ProduceLimits, ValidatedRecords};

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Writes coordinator records for one request or timer tick.
pub struct ConsumerOffsetsLog<'a>(pub &'a Ctx);

impl ConsumerOffsetsLog<'_> {
    /// Create `__consumer_offsets` if it does not exist yet.
    pub fn ensure_topic(&self) -> Result<(), String> {
        self.partition().map(|_| ())
    }

    fn partition(&self) -> Result<std::sync::Arc<Partition>, String> {
        let ctx = self.0;
        if ctx.image().topic(OFFSETS_TOPIC).is_none() {
            let req = NewTopic {
                name: OFFSETS_TOPIC.to_owned(),
                num_partitions: 1,
                replication_factor: -1,
                assignments: vec![],
                configs: vec![
                    ("cleanup.policy".into(), Some("compact".into())),
                    ("segment.bytes".into(), Some(ctx.config.offsets_topic_segment_bytes.to_string())),
                ],
            };
            match ctx.controller.create_topic(&req, false) {
                Ok(_) | Err(ControllerError::TopicAlreadyExists(_)) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        let topic = ctx.image().topic(OFFSETS_TOPIC).cloned().ok_or("offsets topic missing")?;
        ctx.replicas.partition(&topic.topic_id, 0).ok_or_else(|| "offsets partition missing".to_owned())
    }
}

impl OffsetsLog for ConsumerOffsetsLog<'_> {
    fn append(&self, records: &[OffsetsRecord]) -> Result<(), String> {
        if records.is_empty() {
            return Ok(());
        }
        let ctx = self.0;
        let partition = self.partition()?;
        let now = ctx.now_ms();
        let recs: Vec<Record> = records
            .iter()
            .enumerate()
            .map(|(i, r)| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: -1,
                timestamp: now,
                key: Some(r.key()),
                value: r.value(),
                headers: IndexMap::new(),
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            recs.iter(),
            &RecordEncodeOptions { version: 2, compression: Compression::None },
        )
        .map_err(|e| e.to_string())?;
        let limits = ProduceLimits { max_message_bytes: usize::MAX, timestamps: None, require_keys: false };
        let mut records = ValidatedRecords::validate(buf, &limits).map_err(|e| e.to_string())?;
        let res = partition.append(&mut records, now).map_err(|e| e.to_string())?;
        if ctx.config.flush_mode == FlushMode::Fsync {
            partition.flush_through_blocking(res.last_offset).map_err(|e| e.to_string())?;
        }
        ctx.replicas.purgatory().wake(partition.key());
        Ok(())
    }
}

/// Every record of `__consumer_offsets`, oldest first (empty if the topic does not exist).
pub fn read_all(ctx: &Ctx) -> Vec<OffsetsRecord> {
    let Some(topic) = ctx.image().topic(OFFSETS_TOPIC).cloned() else { return vec![] };
    let mut out = Vec::new();
    for partition in topic.partitions.iter().filter_map(|p| ctx.replicas.partition(&topic.topic_id, p.partition)) {
        let mut offset = partition.log_start_offset();
        loop {
            let data = match partition.fetch(offset, 1 << 20) {
                Ok(d) => d,
                Err(e) => {
                    tracing::error!(error = %e, offset, "failed to read __consumer_offsets");
                    break;
                }
            };
            if data.records.is_empty() {
                break;
            }
            let mut buf = data.records.clone();
            let sets = match RecordBatchDecoder::decode_all(&mut buf) {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(error = %e, offset, "undecodable batch in __consumer_offsets; stopping replay here");
                    break;
                }
            };
            // Advance past whole batches: the cleaner may have removed a batch's last
            // records, so record offsets alone would fetch that batch again.
            let mut next = crate::storage::batch::split_batches(&data.records)
                .map_or(offset, |hs| hs.iter().map(|h| h.next_offset()).max().unwrap_or(offset));
            for set in sets {
                for r in set.records {
                    next = next.max(r.offset + 1);
                    let Some(key) = r.key.as_deref() else { continue };
                    match OffsetsRecord::decode(key, r.value.as_deref()) {
                        Some(rec) => out.push(rec),
                        None => tracing::warn!(offset = r.offset, "skipping unreadable __consumer_offsets record"),
                    }
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
