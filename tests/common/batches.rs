//! v2 record batches for produce requests, built with kafka-protocol's encoder, and the
//! byte offsets of the batch header fields for tests that damage a batch on purpose.

use bytes::{Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// Byte offsets inside a v2 batch header.
pub const MAGIC_AT: usize = 16;
pub const CRC_AT: usize = 17;
/// Everything before the first record.
pub const HEADER_LEN: usize = 61;

/// One record to produce: key, value, headers, create time.
#[derive(Clone, Debug)]
pub struct Rec {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp: i64,
}

impl Rec {
    pub fn value(v: &str) -> Rec {
        Rec { key: None, value: Some(v.as_bytes().to_vec()), headers: vec![], timestamp: now_ms() }
    }

    pub fn keyed(k: &str, v: &str) -> Rec {
        Rec { key: Some(k.as_bytes().to_vec()), ..Rec::value(v) }
    }

    pub fn header(mut self, name: &str, value: &str) -> Rec {
        self.headers.push((name.to_owned(), Some(value.as_bytes().to_vec())));
        self
    }

    pub fn at(mut self, timestamp: i64) -> Rec {
        self.timestamp = timestamp;
        self
    }
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Producer identity for an idempotent batch: (producer id, epoch, base sequence).
#[derive(Clone, Copy, Debug)]
pub struct Idempotence {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
}

fn encode(recs: &[Rec], producer: Option<Idempotence>) -> Bytes {
    let records: Vec<Record> = recs
        .iter()
        .enumerate()
        .map(|(i, r)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: producer.map_or(-1, |p| p.producer_id),
            producer_epoch: producer.map_or(-1, |p| p.producer_epoch),
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder starts a new batch whenever `offset - sequence` changes, and
            // writes base sequence = first sequence; `i - 1` keeps one batch with -1.
            sequence: producer.map_or(i as i32 - 1, |p| p.base_sequence + i as i32),
            timestamp: r.timestamp,
            key: r.key.clone().map(Bytes::from),
            value: r.value.clone().map(Bytes::from),
            headers: r
                .headers
                .iter()
                .map(|(k, v)| (StrBytes::from_string(k.clone()), v.clone().map(Bytes::from)))
                .collect::<IndexMap<_, _>>(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, &records, &RecordEncodeOptions { version: 2, compression: Compression::None })
        .expect("encode batch");
    let buf = buf.freeze();
    assert_eq!(batch_sizes(&Some(buf.clone())).len(), 1, "the records were split into several batches");
    buf
}

/// One plain (non-idempotent) batch holding `recs`.
pub fn batch(recs: &[Rec]) -> Bytes {
    encode(recs, None)
}

/// `n` records valued `"{prefix}-{i}"`.
pub fn values(prefix: &str, n: usize) -> Bytes {
    let recs: Vec<Rec> = (0..n).map(|i| Rec::value(&format!("{prefix}-{i}"))).collect();
    batch(&recs)
}

/// An idempotent batch of `n` records.
pub fn idempotent(producer: Idempotence, prefix: &str, n: usize) -> Bytes {
    let recs: Vec<Rec> = (0..n).map(|i| Rec::value(&format!("{prefix}-{i}"))).collect();
    encode(&recs, Some(producer))
}

/// Every record in a fetched record set, in order.
pub fn decode(records: &Option<Bytes>) -> Vec<Record> {
    let mut bytes = records.clone().unwrap_or_default();
    RecordBatchDecoder::decode_all(&mut bytes)
        .expect("fetched records decode")
        .into_iter()
        .flat_map(|set| set.records)
        .collect()
}

/// The values of every fetched record, as UTF-8.
pub fn decode_values(records: &Option<Bytes>) -> Vec<String> {
    decode(records).into_iter().map(|r| String::from_utf8(r.value.unwrap_or_default().to_vec()).unwrap()).collect()
}

/// The size of each batch in a record set, read from the batch headers.
pub fn batch_sizes(records: &Option<Bytes>) -> Vec<usize> {
    let bytes = records.clone().unwrap_or_default();
    let mut sizes = vec![];
    let mut at = 0;
    while at + 12 <= bytes.len() {
        let len = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        sizes.push(12 + len);
        at += 12 + len;
    }
    sizes
}

/// `batch` with one byte of its CRC flipped.
pub fn with_bad_crc(batch: &Bytes) -> Bytes {
    let mut b = batch.to_vec();
    b[CRC_AT] ^= 0xff;
    Bytes::from(b)
}

/// `batch` with a different magic byte (the CRC does not cover the magic).
pub fn with_magic(batch: &Bytes, magic: u8) -> Bytes {
    let mut b = batch.to_vec();
    b[MAGIC_AT] = magic;
    Bytes::from(b)
}

/// Byte offsets of more batch header fields, for tampering.
pub const ATTRIBUTES_AT: usize = 21;
pub const LAST_OFFSET_DELTA_AT: usize = 23;
pub const RECORDS_COUNT_AT: usize = 57;

/// `batch` changed by `edit`, with the CRC recomputed so only the edit is wrong.
pub fn tampered(batch: &Bytes, edit: impl FnOnce(&mut Vec<u8>)) -> Bytes {
    let mut b = batch.to_vec();
    edit(&mut b);
    let crc = crc32c::crc32c(&b[ATTRIBUTES_AT..]);
    b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}
