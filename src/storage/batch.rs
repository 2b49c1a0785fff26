//! Kafka's v2 record batch header (magic 2), the unit the log stores and serves.
//!
//! The broker never rewrites records: a produced batch is validated, gets its base offset
//! and partition leader epoch stamped in place (both outside the CRC), and is written to the
//! log byte for byte.

use thiserror::Error;

/// Length of the fixed v2 batch header; the records follow it.
pub const BATCH_HEADER_LEN: usize = 61;

/// The CRC covers `attributes` (offset 21) through the end of the batch.
const CRC_START: usize = 21;
/// `baseOffset` (8) + `batchLength` (4): the bytes not counted by `batchLength`.
pub const LOG_OVERHEAD: usize = 12;
/// Smallest legal `batchLength`: the header after the length field, with no records.
pub const MIN_BATCH_LENGTH: i32 = (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32;

const OFF_PARTITION_LEADER_EPOCH: usize = 12;
const OFF_MAGIC: usize = 16;
const OFF_CRC: usize = 17;
const OFF_ATTRIBUTES: usize = 21;
const OFF_MAX_TIMESTAMP: usize = 35;

const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_BIT: i16 = 0x08;
const TRANSACTIONAL_BIT: i16 = 0x10;
const CONTROL_BIT: i16 = 0x20;

/// Sequence number of a batch from a producer that is not idempotent.
pub const NO_SEQUENCE: i32 = -1;

/// What went wrong with a record batch.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BatchError {
    #[error("record batch truncated: needs {needed} bytes, only {available} present")]
    Truncated { needed: usize, available: usize },
    #[error("record batch length {batch_length} is below the minimum of {MIN_BATCH_LENGTH}")]
    InvalidLength { batch_length: i32 },
    #[error("unsupported record batch magic {0} (only v2 batches are accepted)")]
    UnsupportedMagic(i8),
    #[error("record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("record batch has a negative records count {0}")]
    NegativeRecordsCount(i32),
    #[error("record batch has a negative last offset delta {0}")]
    NegativeLastOffsetDelta(i32),
    #[error("record batch of {size} bytes exceeds the maximum of {max} bytes")]
    TooLarge { size: usize, max: usize },
    #[error("no record batch in the records")]
    Empty,
    #[error("malformed record inside a batch: {0}")]
    MalformedRecord(&'static str),
    #[error("invalid record batch: {0}")]
    InvalidRecord(&'static str),
    /// Compacted topics need keys; the indexes (within the batch) of the records without.
    #[error("compacted topic cannot accept records without a key (batch indexes {0:?})")]
    RecordsWithoutKey(Vec<i32>),
    #[error("compressed records cannot be decompressed: {0}")]
    CorruptCompression(String),
    #[error("compressed records inflate beyond {max} bytes")]
    DecompressedTooLarge { max: usize },
    #[error("unsupported compression codec {0}")]
    UnsupportedCompression(u8),
    #[error("record timestamp {timestamp} is out of the allowed range around the broker time {now}")]
    InvalidTimestamp { timestamp: i64, now: i64 },
}

/// Compression codec from attribute bits 0-2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
    /// Codec ids 5-7 are not defined by Kafka.
    Unknown(u8),
}

/// The fixed 61-byte header of a v2 record batch.
///
/// On disk and on the wire (big-endian):
///
/// ```text
/// offset  size  field
///      0     8  baseOffset            assigned by the broker
///      8     4  batchLength           bytes after this field (total = batchLength + 12)
///     12     4  partitionLeaderEpoch  assigned by the broker
///     16     1  magic                 always 2
///     17     4  crc                   CRC-32C of bytes 21..end of batch
///     21     2  attributes            bits 0-2 compression, 3 timestamp type,
///                                     4 transactional, 5 control
///     23     4  lastOffsetDelta
///     27     8  baseTimestamp
///     35     8  maxTimestamp
///     43     8  producerId
///     51     2  producerEpoch
///     53     4  baseSequence
///     57     4  recordsCount
///     61     -  records
/// ```
///
/// `baseOffset` and `partitionLeaderEpoch` lie before the CRC'd range, so the broker can
/// stamp them without recomputing the CRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    i32::from_be_bytes(a)
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

impl BatchHeader {
    /// Parses the header at the start of `buf`. Checks only that the header is present and
    /// that the magic is 2; see [`validate_batches`] for the full check.
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, BatchError> {
        if buf.len() < BATCH_HEADER_LEN {
            return Err(BatchError::Truncated { needed: BATCH_HEADER_LEN, available: buf.len() });
        }
        let magic = buf[OFF_MAGIC] as i8;
        if magic != 2 {
            return Err(BatchError::UnsupportedMagic(magic));
        }
        Ok(BatchHeader {
            base_offset: be_i64(buf, 0),
            batch_length: be_i32(buf, 8),
            partition_leader_epoch: be_i32(buf, OFF_PARTITION_LEADER_EPOCH),
            magic,
            crc: be_i32(buf, OFF_CRC) as u32,
            attributes: be_i16(buf, OFF_ATTRIBUTES),
            last_offset_delta: be_i32(buf, 23),
            base_timestamp: be_i64(buf, 27),
            max_timestamp: be_i64(buf, OFF_MAX_TIMESTAMP),
            producer_id: be_i64(buf, 43),
            producer_epoch: be_i16(buf, 51),
            base_sequence: be_i32(buf, 53),
            records_count: be_i32(buf, 57),
        })
    }

    /// Offset of the last record in the batch.
    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    /// Offset right after the batch.
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }

    /// Size of the whole batch in bytes, header included.
    pub fn total_len(&self) -> usize {
        // A negative length never passes validation; treat it as 0 rather than wrapping.
        usize::try_from(self.batch_length).unwrap_or(0) + LOG_OVERHEAD
    }

    pub fn compression(&self) -> Compression {
        match (self.attributes & COMPRESSION_MASK) as u8 {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            other => Compression::Unknown(other),
        }
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }

    /// True when `maxTimestamp` is the broker's append time rather than the producer's.
    pub fn uses_log_append_time(&self) -> bool {
        self.attributes & TIMESTAMP_TYPE_BIT != 0
    }

    /// Sequence number of the last record; sequences wrap from `i32::MAX` to 0 as in Kafka.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence == NO_SEQUENCE {
            return NO_SEQUENCE;
        }
        let delta = self.last_offset_delta;
        if self.base_sequence > i32::MAX - delta {
            delta - (i32::MAX - self.base_sequence) - 1
        } else {
            self.base_sequence + delta
        }
    }
}

/// Splits `buf` into batches checking only the framing: each header is present, has magic
/// 2, a legal length, and the declared bytes are all there. No CRC check.
pub fn split_batches(buf: &[u8]) -> Result<Vec<BatchHeader>, BatchError> {
    let mut headers = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let rest = &buf[pos..];
        let header = BatchHeader::parse(rest)?;
        if header.batch_length < MIN_BATCH_LENGTH {
            return Err(BatchError::InvalidLength { batch_length: header.batch_length });
        }
        let total = header.total_len();
        if rest.len() < total {
            return Err(BatchError::Truncated { needed: total, available: rest.len() });
        }
        headers.push(header);
        pos += total;
    }
    if headers.is_empty() {
        return Err(BatchError::Empty);
    }
    Ok(headers)
}

/// Checks the semantic fields and the CRC of one complete batch (`batch` is exactly the
/// batch's bytes).
pub fn check_batch(header: &BatchHeader, batch: &[u8]) -> Result<(), BatchError> {
    let computed = crc32c::crc32c(&batch[CRC_START..]);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch { stored: header.crc, computed });
    }
    if header.records_count < 0 {
        return Err(BatchError::NegativeRecordsCount(header.records_count));
    }
    if header.last_offset_delta < 0 {
        return Err(BatchError::NegativeLastOffsetDelta(header.last_offset_delta));
    }
    Ok(())
}

/// Kafka's `ProduceRequest.validateRecords` (Produce v3+, every version runnel serves): a
/// Produce request's records for one partition are exactly one batch of magic 2, else the
/// partition is refused with INVALID_RECORD (the reason is returned) and nothing of it is
/// appended. Only the framing is read, as Kafka's batch iterator reads it: a batch whose
/// bytes are not all there counts as no batch; a length field below any batch's minimum,
/// a bad CRC and the rest are left to [`validate_batches`] (CORRUPT_MESSAGE and the others).
/// Replica appends, which carry many batches, do not use it.
pub fn exactly_one_v2_batch(records: &[u8]) -> Result<(), &'static str> {
    // The whole size of the batch at the start of `buf`, when its length field is legal
    // and all its bytes are present.
    let complete = |buf: &[u8]| -> Option<usize> {
        let length = i32::from_be_bytes(buf.get(8..LOG_OVERHEAD)?.try_into().ok()?);
        let size = LOG_OVERHEAD.checked_add(usize::try_from(length).ok()?)?;
        (size > OFF_MAGIC && buf.len() >= size).then_some(size)
    };
    let first = match records.get(8..LOG_OVERHEAD).map(|l| i32::from_be_bytes(l.try_into().unwrap_or_default())) {
        None => return Err("produce requests must hold one record batch per partition; these records hold none"),
        // Shorter than any batch: validate_batches answers it (CORRUPT_MESSAGE, as Kafka).
        Some(length) if length < MIN_BATCH_LENGTH => return Ok(()),
        Some(_) => complete(records)
            .ok_or("produce requests must hold one record batch per partition; its bytes are not all there")?,
    };
    if records[OFF_MAGIC] != 2 {
        return Err("produce requests may only hold record batches of magic 2");
    }
    if complete(&records[first..]).is_some() {
        return Err("produce requests may hold exactly one record batch per partition; these records hold more");
    }
    Ok(())
}

/// Splits a Produce request's records into batches and validates each one: complete,
/// magic 2, legal length, CRC-32C, non-negative counts, at most `max_batch_bytes`.
///
/// Allocates only the returned headers, never according to lengths read from `buf`.
pub fn validate_batches(buf: &[u8], max_batch_bytes: usize) -> Result<Vec<BatchHeader>, BatchError> {
    let headers = split_batches(buf)?;
    let mut pos = 0;
    for header in &headers {
        let total = header.total_len();
        if total > max_batch_bytes {
            return Err(BatchError::TooLarge { size: total, max: max_batch_bytes });
        }
        check_batch(header, &buf[pos..pos + total])?;
        pos += total;
    }
    Ok(headers)
}

/// Stamps the base offset. Panics if `batch` is shorter than a header.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[0..8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Stamps the partition leader epoch. Panics if `batch` is shorter than a header.
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[OFF_PARTITION_LEADER_EPOCH..OFF_PARTITION_LEADER_EPOCH + 4].copy_from_slice(&epoch.to_be_bytes());
}

/// Marks the batch as using log-append time with `ts` as its max timestamp and recomputes
/// the CRC. `batch` starts at a batch; only that batch's declared bytes are covered.
/// Panics if `batch` is shorter than a header.
pub fn set_log_append_time(batch: &mut [u8], ts: i64) {
    let attributes = be_i16(batch, OFF_ATTRIBUTES) | TIMESTAMP_TYPE_BIT;
    batch[OFF_ATTRIBUTES..OFF_ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    set_max_timestamp(batch, ts);
}

/// Sets a batch's max timestamp and recomputes its CRC: Kafka's validator does this for
/// CreateTime batches with the largest record timestamp, so a header that misstates it
/// cannot steer time-based retention or timestamp lookups.
pub fn set_max_timestamp(batch: &mut [u8], ts: i64) {
    batch[OFF_MAX_TIMESTAMP..OFF_MAX_TIMESTAMP + 8].copy_from_slice(&ts.to_be_bytes());
    let declared = usize::try_from(be_i32(batch, 8)).unwrap_or(0) + LOG_OVERHEAD;
    let end = declared.min(batch.len());
    let crc = crc32c::crc32c(&batch[CRC_START..end]);
    batch[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::test_util::build_batch;

    #[test]
    fn parses_header_fields() {
        let b = build_batch(42, &[100, 300, 200], 5);
        let h = BatchHeader::parse(&b).unwrap();
        assert_eq!(h.base_offset, 42);
        assert_eq!(h.total_len(), b.len());
        assert_eq!(h.last_offset(), 44);
        assert_eq!(h.records_count, 3);
        assert_eq!(h.base_timestamp, 100);
        assert_eq!(h.max_timestamp, 300);
        assert_eq!(h.compression(), Compression::None);
        assert!(!h.is_transactional() && !h.is_control() && !h.uses_log_append_time());
    }

    #[test]
    fn validates_good_input_with_several_batches() {
        let mut buf = build_batch(0, &[1, 2], 10);
        buf.extend_from_slice(&build_batch(0, &[3], 10));
        let headers = validate_batches(&buf, 1 << 20).unwrap();
        assert_eq!(headers.len(), 2);
        assert_eq!(headers[0].records_count, 2);
        assert_eq!(headers[1].records_count, 1);
    }

    #[test]
    fn rejects_truncated_input() {
        let buf = build_batch(0, &[1, 2], 10);
        let err = validate_batches(&buf[..buf.len() - 1], 1 << 20).unwrap_err();
        assert!(matches!(err, BatchError::Truncated { .. }), "{err}");
        let err = validate_batches(&buf[..30], 1 << 20).unwrap_err();
        assert_eq!(err, BatchError::Truncated { needed: BATCH_HEADER_LEN, available: 30 });
        assert_eq!(validate_batches(&[], 1 << 20).unwrap_err(), BatchError::Empty);
    }

    #[test]
    fn rejects_bad_crc() {
        let mut buf = build_batch(0, &[1, 2], 10);
        let last = buf.len() - 1;
        buf[last] ^= 0xff;
        let err = validate_batches(&buf, 1 << 20).unwrap_err();
        assert!(matches!(err, BatchError::CrcMismatch { .. }), "{err}");
    }

    #[test]
    fn rejects_bad_magic_and_length() {
        let mut buf = build_batch(0, &[1], 10);
        buf[16] = 1;
        assert_eq!(validate_batches(&buf, 1 << 20).unwrap_err(), BatchError::UnsupportedMagic(1));
        let mut buf = build_batch(0, &[1], 10);
        buf[8..12].copy_from_slice(&10i32.to_be_bytes());
        assert_eq!(validate_batches(&buf, 1 << 20).unwrap_err(), BatchError::InvalidLength { batch_length: 10 });
    }

    #[test]
    fn rejects_oversized_batch() {
        let buf = build_batch(0, &[1], 1000);
        let err = validate_batches(&buf, 500).unwrap_err();
        assert_eq!(err, BatchError::TooLarge { size: buf.len(), max: 500 });
    }

    #[test]
    fn huge_declared_length_is_truncated_not_allocated() {
        let mut buf = build_batch(0, &[1], 1);
        buf[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(matches!(validate_batches(&buf, usize::MAX), Err(BatchError::Truncated { .. })));
    }

    #[test]
    fn stamping_offset_and_epoch_keeps_crc_valid() {
        let mut buf = build_batch(0, &[1, 2], 10);
        set_base_offset(&mut buf, 1234);
        set_partition_leader_epoch(&mut buf, 7);
        let h = validate_batches(&buf, 1 << 20).unwrap()[0];
        assert_eq!((h.base_offset, h.partition_leader_epoch), (1234, 7));
    }

    #[test]
    fn log_append_time_rewrites_crc() {
        let mut buf = build_batch(0, &[1, 2], 10);
        set_log_append_time(&mut buf, 99_999);
        let h = validate_batches(&buf, 1 << 20).unwrap()[0];
        assert!(h.uses_log_append_time());
        assert_eq!(h.max_timestamp, 99_999);
    }

    #[test]
    fn last_sequence_wraps() {
        let mut h = BatchHeader::parse(&build_batch(0, &[1, 2, 3], 1)).unwrap();
        h.base_sequence = 10;
        assert_eq!(h.last_sequence(), 12);
        h.base_sequence = i32::MAX - 1;
        assert_eq!(h.last_sequence(), 0);
        h.base_sequence = NO_SEQUENCE;
        assert_eq!(h.last_sequence(), NO_SEQUENCE);
    }
}
