//! Fetch responses encoded as a list of chunks, so the record bytes go to the socket as
//! their own chunks instead of being copied into one response buffer by the codec: read
//! from the page cache into memory chunks (the default), or left as [`Chunk::File`]s that
//! the connection sends with `sendfile` (`fetch_sendfile`).
//!
//! Everything but the records is encoded with kafka-protocol: each partition is encoded
//! with `records: None` and the null marker is replaced by the length prefix, followed by
//! the records as their own chunks. The outer layers (response header, top-level fields,
//! topic fields, array lengths) are written here. The unit tests assert that the chunks
//! concatenate to exactly what kafka-protocol encodes, at every served version.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{ApiKey, FetchResponse, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Encodable;

use super::ProtocolError;
use crate::storage::{FileSlice, LogSlices};

/// One piece of a response frame, written in order.
#[derive(Debug, Clone)]
pub enum Chunk {
    /// Bytes built in memory.
    Mem(Bytes),
    /// Record bytes still in a segment file.
    File(FileSlice),
}

impl Chunk {
    pub fn len(&self) -> usize {
        match self {
            Chunk::Mem(b) => b.len(),
            Chunk::File(f) => f.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A Fetch response with its record bytes kept out of the codec's types: `records[t][p]`
/// holds what partition `p` of topic `t` returns (empty for none); the `records` field of
/// that partition in `response` is left empty.
pub struct FetchReply {
    pub response: FetchResponse,
    pub records: Vec<Vec<LogSlices>>,
}

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
/// hand holds what the layout below assumes (no unknown tagged fields; the known top-level
/// one, KIP-951's `node_endpoints`, is encoded by the codec in [`top_level_tags`]).
fn chunkable(resp: &FetchResponse) -> bool {
    resp.unknown_tagged_fields.is_empty() && resp.responses.iter().all(|t| t.unknown_tagged_fields.is_empty())
}

/// The top-level tagged-field section of a flexible Fetch response, as the codec writes it:
/// a response with no topics encodes as throttle time (4 bytes), error code (2), session
/// id (4), an empty compact array (1), then this section.
fn top_level_tags(resp: &FetchResponse, version: i16) -> Result<Bytes, ProtocolError> {
    if resp.node_endpoints.is_empty() {
        return Ok(Bytes::from_static(&[0]));
    }
    let only_tags = FetchResponse::default().with_node_endpoints(resp.node_endpoints.clone());
    let mut enc = BytesMut::new();
    only_tags.encode(&mut enc, version).map_err(encode_err)?;
    const FIXED: usize = 4 + 2 + 4 + 1;
    if enc.len() <= FIXED {
        return Err(ProtocolError::Encode("fetch response without its tagged fields".into()));
    }
    Ok(enc.freeze().slice(FIXED..))
}

/// Encode a Fetch response frame (size prefix included) as chunks. With `sendfile`, the
/// record bytes stay file chunks; without, they are read into memory chunks here.
pub fn encode_fetch(
    reply: FetchReply,
    version: i16,
    correlation_id: i32,
    sendfile: bool,
) -> Result<Vec<Chunk>, ProtocolError> {
    let FetchReply { response: mut resp, records } = reply;
    if !chunkable(&resp) {
        // The codec needs the bytes in the response: copy them in.
        for (topic, topic_records) in resp.responses.iter_mut().zip(&records) {
            for (p, slices) in topic.partitions.iter_mut().zip(topic_records) {
                if !slices.is_empty() {
                    p.records = Some(slices.read().map_err(encode_err)?);
                }
            }
        }
        let body = ResponseKind::Fetch(resp);
        return super::encode(ApiKey::Fetch, version, correlation_id, &body).map(|b| vec![Chunk::Mem(b.freeze())]);
    }
    let flexible = version >= 12;
    let mut chunks: Vec<Chunk> = Vec::new();
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
    let none = Vec::new();
    for (t, topic) in resp.responses.iter().enumerate() {
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
        let topic_records = records.get(t).unwrap_or(&none);
        for (i, p) in topic.partitions.iter().enumerate() {
            encode_partition(p, topic_records.get(i), sendfile, version, &mut cur, &mut chunks)?;
        }
        if flexible {
            put_uvarint(&mut cur, 0); // topic tagged fields
        }
    }
    if flexible {
        cur.put_slice(&top_level_tags(&resp, version)?);
    }
    chunks.push(Chunk::Mem(cur.freeze()));
    let total: usize = chunks.iter().map(Chunk::len).sum::<usize>() - 4;
    let size = i32::try_from(total).map_err(encode_err)?;
    // The size prefix lives in the first chunk, which is always in memory.
    if let Some(Chunk::Mem(first)) = chunks.first_mut() {
        let mut patched = BytesMut::from(&first[..]);
        patched[0..4].copy_from_slice(&size.to_be_bytes());
        *first = patched.freeze();
    }
    Ok(chunks.into_iter().filter(|c| !c.is_empty()).collect())
}

/// Append one partition: its fields to `cur`, its records as chunks of their own (the
/// file slices in `slices` when there are any, else the bytes in `p.records`).
fn encode_partition(
    p: &PartitionData,
    slices: Option<&LogSlices>,
    sendfile: bool,
    version: i16,
    cur: &mut BytesMut,
    chunks: &mut Vec<Chunk>,
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
    let slices = slices.filter(|s| !s.is_empty());
    let body: Option<(usize, Vec<Chunk>)> = match (slices, &p.records) {
        (Some(s), _) if sendfile => Some((s.len(), s.slices().iter().cloned().map(Chunk::File).collect())),
        (Some(s), _) => Some((s.len(), vec![Chunk::Mem(s.read().map_err(encode_err)?)])),
        (None, Some(r)) => Some((r.len(), vec![Chunk::Mem(r.clone())])),
        (None, None) => None,
    };
    match body {
        None => cur.put_slice(&enc[cut..cut + null_len]),
        Some((len, body)) => {
            let len = u32::try_from(len).map_err(encode_err)?;
            if flexible {
                put_uvarint(cur, len + 1);
            } else {
                cur.put_i32(len as i32);
            }
            if len > 0 {
                let done = std::mem::replace(cur, BytesMut::with_capacity(256));
                chunks.push(Chunk::Mem(done.freeze()));
                chunks.extend(body);
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
    use std::io::Write;

    fn in_memory(resp: &FetchResponse) -> FetchReply {
        FetchReply { response: resp.clone(), records: vec![] }
    }

    /// The frame the chunks make, file chunks read back.
    fn joined(chunks: &[Chunk]) -> Vec<u8> {
        let mut out = Vec::new();
        for c in chunks {
            match c {
                Chunk::Mem(b) => out.extend_from_slice(b),
                Chunk::File(f) => {
                    let mut buf = vec![0u8; f.len()];
                    f.read_into(&mut buf).unwrap();
                    out.extend_from_slice(&buf);
                }
            }
        }
        out
    }

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
        // Every version served, so a newly served one is covered here too.
        let (lo, hi) = crate::protocol::versions::supported(ApiKey::Fetch).unwrap();
        for version in lo..=hi {
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
            let chunks = encode_fetch(in_memory(&resp), version, 77, true).unwrap();
            assert_eq!(joined(&chunks), expected.to_vec(), "version {version}");
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
        assert_eq!(joined(&encode_fetch(in_memory(&resp), 12, 1, true).unwrap()), expected.to_vec());
    }

    /// Records still in files (two slices of one partition, one of another) encode to the
    /// frame the codec makes from the same bytes in memory, on both paths.
    #[test]
    fn file_slices_encode_like_their_bytes() {
        let mut file = tempfile::tempfile().unwrap();
        let content: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        file.write_all(&content).unwrap();
        let file = std::sync::Arc::new(file);
        let slices = |ranges: &[(u64, usize)]| {
            let mut s = LogSlices::default();
            for &(pos, len) in ranges {
                s.push(FileSlice::new(file.clone(), pos, len));
            }
            s
        };
        let bytes_of = |ranges: &[(u64, usize)]| -> Bytes {
            ranges.iter().flat_map(|&(pos, len)| content[pos as usize..pos as usize + len].to_vec()).collect()
        };
        let a = [(10, 200), (500, 300)];
        let b = [(0, 7)];
        for version in [4, 11, 12, 16, 18] {
            let mut with_bytes = sample();
            for t in &mut with_bytes.responses {
                t.topic_id = uuid::Uuid::nil();
            }
            with_bytes.responses[0].partitions[0].records = Some(bytes_of(&a));
            with_bytes.responses[1].partitions[0].records = Some(bytes_of(&b));
            let expected = super::super::encode(ApiKey::Fetch, version, 9, &ResponseKind::Fetch(with_bytes.clone()))
                .unwrap()
                .to_vec();
            let mut placeholder = with_bytes.clone();
            placeholder.responses[0].partitions[0].records = Some(Bytes::new());
            placeholder.responses[1].partitions[0].records = Some(Bytes::new());
            let records = vec![
                vec![slices(&a), LogSlices::default(), LogSlices::default(), LogSlices::default()],
                vec![slices(&b)],
            ];
            let reply = || FetchReply { response: placeholder.clone(), records: records.clone() };
            let chunks = encode_fetch(reply(), version, 9, true).unwrap();
            assert_eq!(chunks.iter().filter(|c| matches!(c, Chunk::File(_))).count(), 3, "v{version}");
            assert_eq!(joined(&chunks), expected, "v{version}");
            // Without sendfile the same bytes are read into memory chunks.
            let copied = encode_fetch(reply(), version, 9, false).unwrap();
            assert!(copied.iter().all(|c| matches!(c, Chunk::Mem(_))));
            assert_eq!(joined(&copied), expected, "v{version} (copied)");
            // KIP-951's hints (a partition's current leader, the leaders' endpoints) keep
            // the records in files.
            placeholder.responses[0].partitions[0].current_leader.leader_id = kafka_protocol::messages::BrokerId(1);
            let mut with_tag = with_bytes.clone();
            with_tag.responses[0].partitions[0].current_leader.leader_id = kafka_protocol::messages::BrokerId(1);
            let endpoint = kafka_protocol::messages::fetch_response::NodeEndpoint::default()
                .with_node_id(kafka_protocol::messages::BrokerId(1))
                .with_host(StrBytes::from_static_str("10.0.0.1"))
                .with_port(9092)
                .with_rack(Some(StrBytes::from_static_str("r1")));
            placeholder.node_endpoints.push(endpoint.clone());
            with_tag.node_endpoints.push(endpoint);
            let expected = super::super::encode(ApiKey::Fetch, version, 9, &ResponseKind::Fetch(with_tag.clone()))
                .unwrap()
                .to_vec();
            let chunks =
                encode_fetch(FetchReply { response: placeholder.clone(), records: records.clone() }, version, 9, true)
                    .unwrap();
            assert_eq!(chunks.iter().filter(|c| matches!(c, Chunk::File(_))).count(), 3, "v{version} (hints)");
            assert_eq!(joined(&chunks), expected, "v{version} (hints)");
            // A response the chunked path cannot take (an unknown tagged field) copies the
            // file bytes in instead.
            if version >= 12 {
                placeholder.unknown_tagged_fields.insert(9, Bytes::from_static(b"x"));
                with_tag.unknown_tagged_fields.insert(9, Bytes::from_static(b"x"));
                let expected =
                    super::super::encode(ApiKey::Fetch, version, 9, &ResponseKind::Fetch(with_tag)).unwrap().to_vec();
                let chunks = encode_fetch(FetchReply { response: placeholder, records }, version, 9, true).unwrap();
                assert!(chunks.iter().all(|c| matches!(c, Chunk::Mem(_))));
                assert_eq!(joined(&chunks), expected, "v{version} (codec path)");
            }
        }
    }
}
