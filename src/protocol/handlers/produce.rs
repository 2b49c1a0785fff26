//! Produce: validate, append, and (in fsync mode) wait for the disk before answering.

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

use super::{local_partition, str_bytes, topic_or_auto_create};
use crate::config::FlushMode;
use crate::protocol::errors::partition_error;
use crate::protocol::{Ctx, RequestInfo};
use crate::replication::{FramedRecords, PartitionError, ProduceLimits};
use crate::storage::BatchError;
use crate::storage::TimestampBounds;

fn partition_response(index: i32, e: ResponseError, message: Option<String>) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(e.code())
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
        .with_error_message(message.map(str_bytes))
}

/// `None` for acks=0: the producer expects no response.
pub async fn handle(ctx: &Ctx, info: &RequestInfo, req: ProduceRequest, version: i16) -> Option<ProduceResponse> {
    let acks = req.acks;
    let mut responses = Vec::with_capacity(req.topic_data.len());
    let mut to_flush = Vec::new();
    let mut appended = false;
    for td in req.topic_data {
        let name = td.name.0.as_str().to_owned();
        let mut parts = Vec::with_capacity(td.partition_data.len());
        let topic = if acks != 0 && acks != 1 && acks != -1 {
            Err(ResponseError::InvalidRequiredAcks)
        } else {
            topic_or_auto_create(ctx, &name, true)
        };
        for pd in td.partition_data {
            let topic = match &topic {
                Ok(t) => t,
                Err(e) => {
                    parts.push(partition_response(pd.index, *e, None));
                    continue;
                }
            };
            let partition = match local_partition(ctx, topic, pd.index) {
                Ok(p) => p,
                Err(e) => {
                    parts.push(partition_response(pd.index, e, None));
                    continue;
                }
            };
            let (log_config, _) = ctx.replicas.log_config_for(topic);
            if acks == -1 {
                let min_isr = topic
                    .configs
                    .get("min.insync.replicas")
                    .and_then(|v| v.parse::<i32>().ok())
                    .unwrap_or(ctx.config.min_insync_replicas);
                let isr = topic.partitions.get(pd.index as usize).map_or(0, |p| p.isr.len() as i32);
                if isr < min_isr {
                    parts.push(partition_response(
                        pd.index,
                        ResponseError::NotEnoughReplicas,
                        Some(format!("The size of the current ISR {isr} is insufficient to satisfy the min.isr requirement of {min_isr}")),
                    ));
                    continue;
                }
            }
            let Some(records) = pd.records.filter(|r| !r.is_empty()) else {
                parts.push(partition_response(pd.index, ResponseError::CorruptMessage, Some("empty records".into())));
                continue;
            };
            let records = into_mut(records);
            let now = ctx.now_ms();
            let config_ms = |name: &str, default: i64| {
                topic.configs.get(name).and_then(|v| v.parse::<i64>().ok()).unwrap_or(default)
            };
            let limits = ProduceLimits {
                max_message_bytes: log_config.max_message_bytes,
                timestamps: Some(TimestampBounds {
                    now_ms: now,
                    before_max_ms: config_ms("message.timestamp.before.max.ms", i64::MAX),
                    after_max_ms: config_ms("message.timestamp.after.max.ms", 3_600_000),
                }),
                require_keys: topic
                    .configs
                    .get("cleanup.policy")
                    .is_some_and(|p| p.split(',').any(|x| x.trim() == "compact")),
            };
            let validated = match FramedRecords::check(records, &limits) {
                // Decompressing to validate is CPU work sized by the client: off the workers.
                Ok(framed) if framed.needs_decompression(&limits) => {
                    ctx.replicas.pool().run(move || framed.validate(&limits)).await
                }
                Ok(framed) => Ok(framed.validate(&limits)),
                Err(e) => Ok(Err(e)),
            };
            let appended_now = match validated {
                Ok(Ok(mut records)) => partition.append(&mut records, now),
                Ok(Err(e)) => Err(PartitionError::InvalidBatch(e)),
                Err(e) => Err(PartitionError::Pool(e)),
            };
            match appended_now {
                Ok(res) => {
                    appended = true;
                    if ctx.config.flush_mode == FlushMode::Fsync && acks != 0 {
                        to_flush.push((partition.clone(), res.last_offset));
                    }
                    parts.push(
                        PartitionProduceResponse::default()
                            .with_index(pd.index)
                            .with_base_offset(res.base_offset)
                            .with_log_append_time_ms(res.log_append_time)
                            .with_log_start_offset(res.log_start_offset),
                    );
                }
                Err(e) => {
                    let code = partition_error(&e);
                    log_refused(ctx, info, &name, pd.index, &e);
                    let mut resp = partition_response(pd.index, code, Some(e.to_string()));
                    // KIP-467: name the offending records so the client fails only those.
                    if let (true, PartitionError::InvalidBatch(BatchError::RecordsWithoutKey(indexes))) =
                        (version >= 8, &e)
                    {
                        let msg = format!(
                            "Compacted topic cannot accept message without key in topic partition {name}-{}.",
                            pd.index
                        );
                        resp.error_message = Some(str_bytes("One or more records have been rejected"));
                        resp.record_errors = indexes
                            .iter()
                            .map(|i| {
                                BatchIndexAndErrorMessage::default()
                                    .with_batch_index(*i)
                                    .with_batch_index_error_message(Some(str_bytes(msg.clone())))
                            })
                            .collect();
                    }
                    parts.push(resp);
                }
            }
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(td.name)
                .with_topic_id(td.topic_id)
                .with_partition_responses(parts),
        );
    }
    if !to_flush.is_empty() {
        let results = tokio::task::spawn_blocking(move || {
            to_flush
                .iter()
                .map(|(p, offset)| p.flush_through(*offset).map_err(|e| (p.topic.clone(), p.index, e)))
                .collect::<Vec<_>>()
        })
        .await;
        let failed: Vec<(String, i32)> = match results {
            Ok(rs) => rs
                .into_iter()
                .filter_map(|r| r.err())
                .map(|(t, i, e)| {
                    tracing::error!(topic = %t, partition = i, error = %e, "fsync failed; answering KAFKA_STORAGE_ERROR");
                    (t, i)
                })
                .collect(),
            Err(e) => {
                tracing::error!(error = %e, "flush task failed");
                responses.iter().flat_map(|t| t.partition_responses.iter().map(move |p| (t.name.0.to_string(), p.index))).collect()
            }
        };
        for (t, i) in failed {
            for tr in responses.iter_mut().filter(|r| r.name.0.as_str() == t) {
                for pr in tr.partition_responses.iter_mut().filter(|p| p.index == i && p.error_code == 0) {
                    *pr = partition_response(i, ResponseError::KafkaStorageError, Some("fsync failed".into()));
                }
            }
        }
    }
    if appended {
        ctx.replicas.notify_appended();
    }
    if acks == 0 {
        return None;
    }
    Some(ProduceResponse::default().with_responses(responses))
}

/// Refused batches are a client's fault: warn (rate limited per client), else debug.
fn log_refused(ctx: &Ctx, info: &RequestInfo, topic: &str, partition: i32, e: &PartitionError) {
    let warn = match e {
        PartitionError::InvalidBatch(_) => {
            ctx.refusals.should_warn(info.peer.map(|p| p.ip()), &info.client_id, ctx.now_ms())
        }
        PartitionError::Pool(_) => {
            tracing::error!(peer = ?info.peer, topic, partition, error = %e, "produce failed in the blocking pool");
            return;
        }
        _ => None,
    };
    match warn {
        Some(suppressed) => tracing::warn!(
            peer = ?info.peer, client_id = %info.client_id, topic, partition, error = %e,
            refused_since_last_warning = suppressed, "produce refused: invalid record batch, nothing stored"
        ),
        None => {
            tracing::debug!(peer = ?info.peer, client_id = %info.client_id, topic, partition, error = %e, "produce refused")
        }
    }
}

/// The request buffer is usually uniquely owned, so this is normally free.
fn into_mut(b: Bytes) -> BytesMut {
    b.try_into_mut().unwrap_or_else(|shared| BytesMut::from(&shared[..]))
}
