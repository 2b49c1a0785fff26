//! Walking the records inside an uncompressed v2 batch: exact timestamp lookups and the
//! log cleaner.
//!
//! Each record after the batch header is:
//!
//! ```text
//! length          varint   bytes after this field
//! attributes      int8     unused
//! timestampDelta  varlong  relative to the batch's baseTimestamp
//! offsetDelta     varint   relative to the batch's baseOffset
//! keyLength      varint   -1 for a null key, then the key's bytes
//! valueLength    varint   -1 for a null value (a tombstone), then the value's bytes
//! headers ...             skipped via `length`
//! ```
//!
//! Varints are zigzag-encoded, little-endian base-128 as in protobuf.

use std::borrow::Cow;
use std::ops::Range;

use super::batch::{BatchError, BatchHeader, Compression, BATCH_HEADER_LEN};
use super::codec::{decompress, DecompressError};

/// Largest record section decompressed to read a compressed batch's records (the log
/// cleaner, exact timestamp lookups); bigger batches are handled whole.
pub const MAX_DECOMPRESSED_BYTES: usize = 64 << 20;

/// Why a batch's records could not be read.
#[derive(Debug, thiserror::Error)]
pub enum UnreadableBatch {
    #[error(transparent)]
    Decompress(#[from] DecompressError),
    #[error(transparent)]
    Records(#[from] BatchError),
}

/// The records of any batch (the whole batch, header included) and the bytes their
/// ranges index: the batch itself when uncompressed, else its record section
/// decompressed, bounded by [`MAX_DECOMPRESSED_BYTES`].
pub fn batch_records<'a>(
    h: &BatchHeader,
    batch: &'a [u8],
) -> Result<(Cow<'a, [u8]>, Vec<RecordView>), UnreadableBatch> {
    let end = h.total_len().min(batch.len());
    let (data, start) = match h.compression() {
        Compression::None => (Cow::Borrowed(&batch[..end]), BATCH_HEADER_LEN),
        codec => (Cow::Owned(decompress(codec, &batch[BATCH_HEADER_LEN.min(end)..end], MAX_DECOMPRESSED_BYTES)?), 0),
    };
    let records = records_from(h, &data, start)?;
    Ok((data, records))
}

/// Offset and timestamp of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordPosition {
    pub offset: i64,
    pub timestamp: i64,
}

/// Decodes a zigzag varint of at most `max_bytes` bytes, advancing `pos`.
pub(crate) fn read_varlong(buf: &[u8], pos: &mut usize, max_bytes: usize) -> Result<i64, BatchError> {
    let mut raw: u64 = 0;
    for i in 0..max_bytes {
        let byte = *buf.get(*pos).ok_or(BatchError::MalformedRecord("varint runs past the batch"))?;
        *pos += 1;
        raw |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
        }
    }
    Err(BatchError::MalformedRecord("varint too long"))
}

/// One record inside an uncompressed batch, located by byte ranges within the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordView {
    pub offset: i64,
    pub timestamp: i64,
    /// The key's bytes; `None` for a null key.
    pub key: Option<Range<usize>>,
    /// A null value: a tombstone on a compacted topic.
    pub value_is_null: bool,
    /// The value's bytes; `None` for a null value.
    pub value: Option<Range<usize>>,
    /// The whole record, its length prefix included.
    pub bytes: Range<usize>,
}

/// Reads a length-prefixed field (key or value): `None` for length -1 (null).
fn read_nullable(body: &[u8], pos: &mut usize) -> Result<Option<Range<usize>>, BatchError> {
    let len = read_varlong(body, pos, 5)?;
    if len < 0 {
        return Ok(None);
    }
    let start = *pos;
    let end = usize::try_from(len)
        .ok()
        .and_then(|l| start.checked_add(l))
        .filter(|&e| e <= body.len())
        .ok_or(BatchError::MalformedRecord("field runs past its record"))?;
    *pos = end;
    Ok(Some(start..end))
}

/// The records of `batch` (the whole batch, header included), which must be uncompressed.
/// For log-append-time batches every record carries the batch's max timestamp.
pub fn records(header: &BatchHeader, batch: &[u8]) -> Result<Vec<RecordView>, BatchError> {
    let end = header.total_len().min(batch.len());
    records_from(header, &batch[..end], BATCH_HEADER_LEN)
}

/// The `header.records_count` records found in `data` from `pos` on: the record section
/// of a batch, in place or decompressed. Ranges in the result index `data`.
pub fn records_from(header: &BatchHeader, data: &[u8], mut pos: usize) -> Result<Vec<RecordView>, BatchError> {
    let end = data.len();
    let batch = data;
    // Capacity is bounded by the bytes present: a record takes at least 1 byte.
    let mut out = Vec::with_capacity((header.records_count.max(0) as usize).min(end));
    for _ in 0..header.records_count {
        let record_start = pos;
        let length = read_varlong(&batch[..end], &mut pos, 5)?;
        let body_start = pos;
        let body_end = usize::try_from(length)
            .ok()
            .and_then(|l| body_start.checked_add(l))
            .filter(|&e| e <= end)
            .ok_or(BatchError::MalformedRecord("record length runs past the batch"))?;
        let body = &batch[..body_end];
        pos += 1; // attributes
        let timestamp_delta = read_varlong(body, &mut pos, 10)?;
        let offset_delta = read_varlong(body, &mut pos, 5)?;
        let key = read_nullable(body, &mut pos)?;
        let value = read_nullable(body, &mut pos)?;
        let value_is_null = value.is_none();
        let timestamp = if header.uses_log_append_time() {
            header.max_timestamp
        } else {
            header.base_timestamp.wrapping_add(timestamp_delta)
        };
        out.push(RecordView {
            offset: header.base_offset + offset_delta,
            timestamp,
            key,
            value_is_null,
            value,
            bytes: record_start..body_end,
        });
        pos = body_end;
    }
    Ok(out)
}

/// Offsets and timestamps of the records in `batch`; see [`records`].
pub fn record_positions(header: &BatchHeader, batch: &[u8]) -> Result<Vec<RecordPosition>, BatchError> {
    Ok(records(header, batch)?
        .into_iter()
        .map(|r| RecordPosition { offset: r.offset, timestamp: r.timestamp })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::test_util::build_batch;

    #[test]
    fn walks_records() {
        let b = build_batch(10, &[500, 100, 1_000_000_000_000], 300);
        let h = BatchHeader::parse(&b).unwrap();
        let recs = record_positions(&h, &b).unwrap();
        let got: Vec<_> = recs.iter().map(|r| (r.offset, r.timestamp)).collect();
        assert_eq!(got, vec![(10, 500), (11, 100), (12, 1_000_000_000_000)]);
    }

    #[test]
    fn rejects_record_running_past_batch() {
        let b = build_batch(0, &[1, 2], 3);
        let h = BatchHeader::parse(&b).unwrap();
        assert!(record_positions(&h, &b[..b.len() - 2]).is_err());
    }
}
