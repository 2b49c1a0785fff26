//! `__consumer_offsets`: the coordinator's records stored as an ordinary (internal,
//! compacted) topic in runnel's own log.

use super::Ctx;
use crate::config::FlushMode;
use crate::controller::{ControllerError, NewTopic};
use crate::coordinator::offsets_codec::{self, OffsetsRecord};
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
                Ok(_) | Err(ControllerError::TopicAlreadyExists(_)) => ctx.sync_partitions(),
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
        let buf = offsets_codec::encode_batch(records, now)?;
        let limits = ProduceLimits { max_message_bytes: usize::MAX, timestamps: None, require_keys: false };
        let mut records = ValidatedRecords::validate(buf, &limits).map_err(|e| e.to_string())?;
        let res = partition.append(&mut records, now).map_err(|e| e.to_string())?;
        if ctx.config.flush_mode == FlushMode::Fsync {
            partition.flush_through(res.last_offset).map_err(|e| e.to_string())?;
        }
        ctx.replicas.notify_appended();
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
            let logged = match offsets_codec::decode_batches(&data.records) {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!(error = %e, offset, "undecodable batch in __consumer_offsets; stopping replay here");
                    break;
                }
            };
            // Advance past whole batches: the cleaner may have removed a batch's last
            // records, so record offsets alone would fetch that batch again.
            let mut next = crate::storage::batch::split_batches(&data.records)
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
