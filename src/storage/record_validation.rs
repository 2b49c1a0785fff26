//! Produce-time validation of what is inside a batch, so that nothing a consumer cannot
//! decode is ever stored.
//!
//! For uncompressed batches every record is walked: its length, attributes, timestamp
//! delta, offset delta (must be 0, 1, 2, … in order), key, value and headers must fill the
//! record exactly, the record count must match the header, and the records must fill the
//! batch exactly. Compressed batches are not decompressed (DESIGN: none on the hot path):
//! their codec, count and offset-delta fields are checked against each other, and their
//! timestamps through the header's base and max timestamp. The exception is a compacted
//! topic, whose records must all have keys: there a compressed batch is decompressed
//! (bounded) to check them, as Kafka does.

use super::batch::{BatchError, BatchHeader, Compression, BATCH_HEADER_LEN};
use super::record::batch_records;

/// Bounds on record timestamps relative to the broker clock (CreateTime batches only):
/// Kafka's message.timestamp.before.max.ms / message.timestamp.after.max.ms.
#[derive(Debug, Clone, Copy)]
pub struct TimestampBounds {
    pub now_ms: i64,
    pub before_max_ms: i64,
    pub after_max_ms: i64,
}

impl TimestampBounds {
    fn check(&self, ts: i64) -> Result<(), BatchError> {
        let too_old = self.now_ms.saturating_sub(ts) > self.before_max_ms;
        let too_new = ts.saturating_sub(self.now_ms) > self.after_max_ms;
        if too_old || too_new {
            return Err(BatchError::InvalidTimestamp { timestamp: ts, now: self.now_ms });
        }
        Ok(())
    }
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn varlong(&mut self, max_bytes: usize) -> Result<i64, BatchError> {
        let mut raw: u64 = 0;
        for i in 0..max_bytes {
            let byte = *self.buf.get(self.pos).ok_or(BatchError::MalformedRecord("varint runs past the record"))?;
            self.pos += 1;
            raw |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
        }
        Err(BatchError::MalformedRecord("varint too long"))
    }

    fn varint(&mut self) -> Result<i64, BatchError> {
        self.varlong(5)
    }

    /// Is the next sized field null (length -1)? Does not advance.
    fn peek_null(&mut self) -> Result<bool, BatchError> {
        let save = self.pos;
        let len = self.varint()?;
        self.pos = save;
        Ok(len == -1)
    }

    /// A varint length (-1 = null where `nullable`) followed by that many bytes.
    fn skip_sized(&mut self, nullable: bool) -> Result<(), BatchError> {
        let len = self.varint()?;
        if len == -1 && nullable {
            return Ok(());
        }
        let len = usize::try_from(len).map_err(|_| BatchError::MalformedRecord("negative length"))?;
        let end = self
            .pos
            .checked_add(len)
            .filter(|e| *e <= self.buf.len())
            .ok_or(BatchError::MalformedRecord("field runs past the record"))?;
        self.pos = end;
        Ok(())
    }
}

/// Check one batch of a Produce request. `batch` is the whole batch, header included.
/// `require_keys` (compacted topics): every record must have a key.
pub fn validate_produce_batch(
    header: &BatchHeader,
    batch: &[u8],
    bounds: &TimestampBounds,
    require_keys: bool,
) -> Result<(), BatchError> {
    if let Compression::Unknown(c) = header.compression() {
        return Err(BatchError::UnsupportedCompression(c));
    }
    if header.records_count == 0 {
        return Err(BatchError::InvalidRecord("a record batch must hold at least one record"));
    }
    if i64::from(header.last_offset_delta) != i64::from(header.records_count) - 1 {
        return Err(BatchError::InvalidRecord("last offset delta does not match the record count"));
    }
    let check_ts = !header.uses_log_append_time();
    if header.compression() != Compression::None {
        if check_ts {
            bounds.check(header.base_timestamp)?;
            bounds.check(header.max_timestamp)?;
        }
        if require_keys {
            let (_, records) = batch_records(header, batch)
                .map_err(|_| BatchError::MalformedRecord("compressed records are unreadable"))?;
            let keyless: Vec<i32> = (0..).zip(&records).filter(|(_, r)| r.key.is_none()).map(|(i, _)| i).collect();
            if !keyless.is_empty() {
                return Err(BatchError::RecordsWithoutKey(keyless));
            }
        }
        return Ok(());
    }
    let end = header.total_len().min(batch.len());
    let mut c = Cursor { buf: &batch[..end], pos: BATCH_HEADER_LEN };
    // Bounded by the records actually present (each takes at least one byte).
    let mut keyless = Vec::new();
    for expected_delta in 0..header.records_count {
        let length = c.varint()?;
        let length = usize::try_from(length).map_err(|_| BatchError::MalformedRecord("negative record length"))?;
        let body_end = c
            .pos
            .checked_add(length)
            .filter(|e| *e <= end)
            .ok_or(BatchError::MalformedRecord("record runs past the batch"))?;
        let mut r = Cursor { buf: &batch[..body_end], pos: c.pos };
        r.pos =
            r.pos.checked_add(1).filter(|p| *p <= body_end).ok_or(BatchError::MalformedRecord("record too short"))?;
        let ts_delta = r.varlong(10)?;
        let offset_delta = r.varint()?;
        if offset_delta != i64::from(expected_delta) {
            return Err(BatchError::InvalidRecord("record offset deltas are not consecutive from 0"));
        }
        if require_keys && r.peek_null()? {
            keyless.push(expected_delta);
        }
        r.skip_sized(true)?; // key
        r.skip_sized(true)?; // value
        let headers = r.varint()?;
        if headers < 0 {
            return Err(BatchError::MalformedRecord("negative header count"));
        }
        for _ in 0..headers {
            r.skip_sized(false)?; // header key
            r.skip_sized(true)?; // header value
        }
        if r.pos != body_end {
            return Err(BatchError::InvalidRecord("record fields do not fill the record length"));
        }
        let ts = header.base_timestamp.wrapping_add(ts_delta);
        if check_ts {
            bounds.check(ts)?;
        }
        c.pos = body_end;
    }
    if c.pos != end {
        return Err(BatchError::InvalidRecord("bytes left in the batch after the last record"));
    }
    if !keyless.is_empty() {
        return Err(BatchError::RecordsWithoutKey(keyless));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::test_util::{build_records_batch, gzipped, TestRecord};

    const ANY_TIME: TimestampBounds = TimestampBounds { now_ms: 0, before_max_ms: i64::MAX, after_max_ms: i64::MAX };

    fn batch(keys: &[Option<&'static [u8]>]) -> Vec<u8> {
        let records: Vec<TestRecord> =
            keys.iter().map(|&key| TestRecord { key, value: Some(b"v"), timestamp: 1 }).collect();
        build_records_batch(0, &records, -1)
    }

    #[test]
    fn compacted_topics_need_keys_in_compressed_batches_too() {
        for compress in [false, true] {
            let prepare = |b: Vec<u8>| if compress { gzipped(&b) } else { b };
            let keyed = prepare(batch(&[Some(b"a"), Some(b"b")]));
            let h = BatchHeader::parse(&keyed).unwrap();
            assert_eq!(validate_produce_batch(&h, &keyed, &ANY_TIME, true), Ok(()));
            let mixed = prepare(batch(&[Some(b"a"), None, Some(b"c"), None]));
            let h = BatchHeader::parse(&mixed).unwrap();
            assert_eq!(
                validate_produce_batch(&h, &mixed, &ANY_TIME, true),
                Err(BatchError::RecordsWithoutKey(vec![1, 3]))
            );
            // Only compacted topics require keys.
            assert_eq!(validate_produce_batch(&h, &mixed, &ANY_TIME, false), Ok(()));
        }
        // A compressed batch whose data does not decompress cannot be checked: refused.
        let mut bogus = batch(&[Some(b"a")]);
        crate::storage::test_util::mark_compressed(&mut bogus);
        let h = BatchHeader::parse(&bogus).unwrap();
        assert!(matches!(validate_produce_batch(&h, &bogus, &ANY_TIME, true), Err(BatchError::MalformedRecord(_))));
        assert_eq!(validate_produce_batch(&h, &bogus, &ANY_TIME, false), Ok(()));
    }
}
