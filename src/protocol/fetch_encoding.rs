//! Fetch responses encoded as a list of chunks, so the record bytes read from the log go
//! to the socket as they are (a vectored write) instead of being copied into one response
//! buffer by the codec.
//!
//! Everything but the records is encoded with kafka-protocol: each partition is encoded
//! with `records: None` and the null marker is replaced by the length prefix, followed by
//! the records as their own chunk. The outer layers (response header, top-level fields,
//! topic fields, array lengths) are written here. The unit tests assert that the chunks
//! concatenate to exactly what kafka-protocol encodes, at every served version.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{ApiKey, FetchResponse, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Encodable;

use super::ProtocolError;

fn put_uvarint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

fn put_array_len(buf: &mut BytesMut, n: usize, flexible: bool) {
    if flexible {
        put_uvarint(buf, n as u32 + 1);
    } else {
        buf.put_i32(n as i32);
    }
}

fn encode_err(e: impl std::fmt::Display) -> ProtocolError {
    ProtocolError::Encode(e.to_string())
}

/// Can this response take the chunked path? Only when every field this encoder writes by
/// hand holds what the layout below assumes (no tagged fields, no unknown fields).
fn chunkable(resp: &FetchResponse) -> bool {
    resp.node_endpoints.is_empty()
        && resp.unknown_tagged_fields.is_empty()
        && resp.responses.iter().all(|t| t.unknown_tagged_fields.is_empty())
}

/// Encode a Fetch response frame (size prefix included) as chunks.
pub fn encode_fetch(resp: &FetchResponse, version: i16, correlation_id: i32) -> Result<Vec<Bytes>, ProtocolError> {
    if !chunkable(resp) {
        let body = ResponseKind::Fetch(resp.clone());
        return super::encode(ApiKey::Fetch, version, correlation_id, &body).map(|b| vec![b.freeze()]);
    }
    let flexible = version >= 12;
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut cur = BytesMut::with_capacity(256);
    cur.put_i32(0); // size, patched at the end
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    header.encode(&mut cur, ApiKey::Fetch.response_header_version(version)).map_err(encode_err)?;
    cur.put_i32(resp.throttle_time_ms);
    if version >= 7 {
        cur.put_i16(resp.error_code);
        cur.put_i32(resp.session_id);
    }
    put_array_len(&mut cur, resp.responses.len(), flexible);
    for topic in &resp.responses {
        if version >= 13 {
            cur.put_slice(topic.topic_id.as_bytes());
        } else {
            let name = topic.topic.0.as_bytes();
            if flexible {
                put_uvarint(&mut cur, name.len() as u32 + 1);
            } else {
                cur.put_i16(name.len() as i16);
            }
            cur.put_slice(name);
        }
        put_array_len(&mut cur, topic.partitions.len(), flexible);
        for p in &topic.partitions {
            encode_partition(p, version, &mut cur, &mut chunks)?;
        }
        if flexible {
            put_uvarint(&mut cur, 0); // topic tagged fields
        }
    }
    if flexible {
        put_uvarint(&mut cur, 0); // top-level tagged fields
    }
    chunks.push(cur.freeze());
    let total: usize = chunks.iter().map(Bytes::len).sum::<usize>() - 4;
    let size = i32::try_from(total).map_err(encode_err)?;
    // The size prefix lives in the first chunk.
    let mut first = BytesMut::from(&chunks[0][..]);
    first[0..4].copy_from_slice(&size.to_be_bytes());
    chunks[0] = first.freeze();
    Ok(chunks.into_iter().filter(|c| !c.is_empty()).collect())
}

/// Append one partition: its fields to `cur`, its records as a chunk of their own.
fn encode_partition(
    p: &PartitionData,
    version: i16,
    cur: &mut BytesMut,
    chunks: &mut Vec<Bytes>,
) -> Result<(), ProtocolError> {
    let flexible = version >= 12;
    // Null records are 0x00 (compact) or -1 (i32); in flexible versions the partition's
    // tagged fields follow them.
    let null_len = if flexible { 1 } else { 4 };
    let mut without = p.clone();
    without.records = None;
    let mut enc = BytesMut::new();
    without.encode(&mut enc, version).map_err(encode_err)?;
    // The fields before the records do not depend on the tagged fields: measure them on a
    // copy without any (which ends with null records and, if flexible, a 0x00 count).
    let mut untagged = without.clone();
    untagged.diverging_epoch = Default::default();
    untagged.current_leader = Default::default();
    untagged.snapshot_id = Default::default();
    untagged.unknown_tagged_fields.clear();
    let mut bare = BytesMut::new();
    untagged.encode(&mut bare, version).map_err(encode_err)?;
    let cut = bare.len() - null_len - usize::from(flexible);
    cur.put_slice(&enc[..cut]);
    match &p.records {
        None => cur.put_slice(&enc[cut..cut + null_len]),
        Some(r) => {
            if flexible {
                put_uvarint(cur, r.len() as u32 + 1);
            } else {
                cur.put_i32(r.len() as i32);
            }
            if !r.is_empty() {
                let done = std::mem::replace(cur, BytesMut::with_capacity(256));
                chunks.push(done.freeze());
                chunks.push(r.clone());
            }
        }
    }
    cur.put_slice(&enc[cut + null_len..]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{AbortedTransaction, FetchableTopicResponse};
    use kafka_protocol::messages::{ProducerId, TopicName};
    use kafka_protocol::protocol::StrBytes;

    fn sample() -> FetchResponse {
        let data = |i: i32, records: Option<Bytes>| {
            PartitionData::default()
                .with_partition_index(i)
                .with_high_watermark(100 + i64::from(i))
                .with_last_stable_offset(90)
                .with_log_start_offset(3)
                .with_records(records)
        };
        let big = Bytes::from(vec![7u8; 300]);
        FetchResponse::default().with_throttle_time_ms(5).with_session_id(0).with_responses(vec![
            FetchableTopicResponse::default()
                .with_topic(TopicName(StrBytes::from_static_str("alpha")))
                .with_topic_id(uuid::Uuid::from_u128(42))
                .with_partitions(vec![
                    data(0, Some(big.clone())),
                    data(1, Some(Bytes::new())),
                    data(2, None).with_error_code(1),
                    data(3, Some(Bytes::from_static(b"abc"))).with_aborted_transactions(Some(vec![
                        AbortedTransaction::default().with_producer_id(ProducerId(9)).with_first_offset(4),
                    ])),
                ]),
            FetchableTopicResponse::default()
                .with_topic(TopicName(StrBytes::from_static_str("beta")))
                .with_topic_id(uuid::Uuid::from_u128(43))
                .with_partitions(vec![data(0, Some(big))]),
            FetchableTopicResponse::default().with_topic(TopicName(StrBytes::from_static_str("empty"))),
        ])
    }

    #[test]
    fn chunks_equal_the_codec_encoding_at_every_version() {
        for version in 4..=17 {
            let mut resp = sample();
            if version < 13 {
                for t in &mut resp.responses {
                    t.topic_id = uuid::Uuid::nil();
                }
            } else {
                for t in &mut resp.responses {
                    t.topic = TopicName::default();
                }
            }
            if version < 5 {
                for t in &mut resp.responses {
                    for p in &mut t.partitions {
                        p.log_start_offset = -1;
                    }
                }
            }
            let expected =
                super::super::encode(ApiKey::Fetch, version, 77, &ResponseKind::Fetch(resp.clone())).unwrap();
            let chunks = encode_fetch(&resp, version, 77).unwrap();
            let joined: Vec<u8> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
            assert_eq!(joined, expected.to_vec(), "version {version}");
            assert!(chunks.len() > 2, "records travel as their own chunks (v{version})");
        }
    }

    #[test]
    fn tagged_fields_fall_back_or_stay_exact() {
        let mut resp = sample();
        resp.responses[0].partitions[0].current_leader.leader_id = kafka_protocol::messages::BrokerId(3);
        resp.responses[0].partitions[0].current_leader.leader_epoch = 2;
        for t in &mut resp.responses {
            t.topic_id = uuid::Uuid::nil();
        }
        let expected = super::super::encode(ApiKey::Fetch, 12, 1, &ResponseKind::Fetch(resp.clone())).unwrap();
        let joined: Vec<u8> = encode_fetch(&resp, 12, 1).unwrap().iter().flat_map(|c| c.iter().copied()).collect();
        assert_eq!(joined, expected.to_vec());
    }
}
