//! Record batches for the CLI: v2 batches to produce (kafka-protocol's encoder) and the
//! records of fetched bytes, decoded with the storage layer's parser and bounded
//! decompression (every codec Kafka has), CRC checked.

use bytes::{Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

use super::CliError;
use crate::storage::batch::{check_batch, BatchHeader, MIN_BATCH_LENGTH};
use crate::storage::record::batch_records;

/// The most bytes one Fetch asks for (per partition and in total).
pub const FETCH_MAX_BYTES: i32 = 8 << 20;
/// Records per produced batch.
pub const BATCH_RECORDS: usize = 500;

/// A record to produce.
pub struct Outgoing {
    pub key: Option<Bytes>,
    pub value: Bytes,
}

/// One v2 batch (no compression, no producer id) holding `records`, stamped `timestamp`.
pub fn encode_batch(records: &[Outgoing], timestamp: i64) -> Result<Bytes, CliError> {
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
            // kafka-protocol's encoder starts a new batch wherever offset - sequence
            // changes, and takes the batch's base sequence from its first record: this
            // keeps all records in one batch with base sequence -1 (no producer id).
            // Kafka refuses a Produce partition holding more than one batch.
            sequence: (i as i32).wrapping_sub(1),
            timestamp,
            key: r.key.clone(),
            value: Some(r.value.clone()),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, recs.iter(), &options)
        .map_err(|e| CliError::Protocol(format!("cannot encode a record batch: {e}")))?;
    Ok(buf.freeze())
}

/// A consumed record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incoming {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
}

/// The data records at or after `from` in fetched `bytes`. A partial batch at the end
/// (Fetch may cut the last one) is left out; control batches (transaction markers) are
/// skipped. Returns the records and the offset to fetch next.
pub fn decode_fetched(bytes: &[u8], from: i64) -> Result<(Vec<Incoming>, i64), CliError> {
    let mut out = Vec::new();
    let mut next = from;
    let mut pos = 0;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        let Ok(header) = BatchHeader::parse(rest) else { break };
        if header.batch_length < MIN_BATCH_LENGTH {
            return Err(CliError::Protocol(format!(
                "batch at offset {} has length {}",
                header.base_offset, header.batch_length
            )));
        }
        let total = header.total_len();
        if rest.len() < total {
            break;
        }
        let batch = &rest[..total];
        pos += total;
        check_batch(&header, batch)
            .map_err(|e| CliError::Protocol(format!("batch at offset {}: {e}", header.base_offset)))?;
        next = next.max(header.next_offset());
        if header.is_control() {
            continue;
        }
        let (data, records) = batch_records(&header, batch)
            .map_err(|e| CliError::Protocol(format!("batch at offset {}: {e}", header.base_offset)))?;
        for r in records {
            if r.offset < from {
                continue;
            }
            out.push(Incoming {
                offset: r.offset,
                timestamp: r.timestamp,
                key: r.key.map(|k| data[k].to_vec()),
                value: r.value.map(|v| data[v].to_vec()),
            });
        }
    }
    Ok((out, next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::batch::Compression as Codec;
    use crate::storage::test_util::compressed_with;

    fn rec(k: Option<&str>, v: &str) -> Outgoing {
        Outgoing { key: k.map(|k| Bytes::from(k.to_owned())), value: Bytes::from(v.to_owned()) }
    }

    #[test]
    fn encoded_batches_decode_back_compressed_or_not() {
        let batch = encode_batch(&[rec(None, "a"), rec(Some("k"), "b")], 1_000).unwrap();
        let header = BatchHeader::parse(&batch).unwrap();
        assert_eq!((header.total_len(), header.records_count, header.base_sequence), (batch.len(), 2, -1));
        let (records, next) = decode_fetched(&batch, 0).unwrap();
        assert_eq!(next, 2);
        assert_eq!(records[1].key.as_deref(), Some(&b"k"[..]));
        assert_eq!(records[1].value.as_deref(), Some(&b"b"[..]));
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            let compressed = compressed_with(&batch, codec);
            let (again, _) = decode_fetched(&compressed, 1).unwrap();
            assert_eq!(again, records[1..].to_vec(), "{codec:?}");
        }
    }

    #[test]
    fn a_cut_last_batch_is_left_for_the_next_fetch() {
        let batch = encode_batch(&[rec(None, "a")], 1).unwrap();
        let mut two = batch.to_vec();
        two.extend_from_slice(&batch[..batch.len() - 3]);
        let (records, next) = decode_fetched(&two, 0).unwrap();
        assert_eq!((records.len(), next), (1, 1));
        let mut bad = batch.to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(decode_fetched(&bad, 0).is_err());
    }
}
