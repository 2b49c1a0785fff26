//! The API's records as v2 record batches: one uncompressed batch per partition of a
//! produce request (offsets from 0; the log stamps the base offset), and the records of
//! stored batches back (any compression, control batches skipped).
//!
//! A record inside a batch, after the 61-byte batch header:
//!
//! ```text
//! length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
//! keyLength varint (-1: null) + key, valueLength varint (-1: null) + value,
//! headerCount varint, per header: keyLength varint + key, valueLength varint + value
//! ```

use bytes::{BufMut, Bytes, BytesMut};

use crate::storage::record::{batch_records, read_varlong};
use crate::storage::{BatchHeader, BATCH_HEADER_LEN};

/// One record to write.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRecord {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
    pub timestamp: i64,
}

/// One record read back.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRecord {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

fn put_varlong(buf: &mut BytesMut, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        buf.put_u8((z as u8) | 0x80);
        z >>= 7;
    }
    buf.put_u8(z as u8);
}

fn put_nullable(buf: &mut BytesMut, b: Option<&[u8]>) {
    match b {
        None => put_varlong(buf, -1),
        Some(b) => {
            put_varlong(buf, b.len() as i64);
            buf.put_slice(b);
        }
    }
}

/// An uncompressed batch of `records` (at least one), without producer id.
pub fn encode_batch(records: &[NewRecord]) -> BytesMut {
    let base_ts = records.iter().map(|r| r.timestamp).min().unwrap_or(0);
    let max_ts = records.iter().map(|r| r.timestamp).max().unwrap_or(0);
    let mut body = BytesMut::new();
    let mut rec = BytesMut::new();
    for (i, r) in records.iter().enumerate() {
        rec.clear();
        rec.put_i8(0);
        put_varlong(&mut rec, r.timestamp - base_ts);
        put_varlong(&mut rec, i as i64);
        put_nullable(&mut rec, r.key.as_deref());
        put_nullable(&mut rec, r.value.as_deref());
        put_varlong(&mut rec, r.headers.len() as i64);
        for (k, v) in &r.headers {
            put_nullable(&mut rec, Some(k.as_bytes()));
            put_nullable(&mut rec, v.as_deref());
        }
        put_varlong(&mut body, rec.len() as i64);
        body.put_slice(&rec);
    }
    let mut buf = BytesMut::with_capacity(BATCH_HEADER_LEN + body.len());
    buf.put_i64(0); // base offset: stamped by the log
    buf.put_i32((BATCH_HEADER_LEN - 12 + body.len()) as i32);
    buf.put_i32(-1); // partition leader epoch: stamped by the log
    buf.put_i8(2);
    buf.put_u32(0); // CRC, below
    let crc_start = buf.len();
    buf.put_i16(0); // attributes: no compression, create time
    buf.put_i32(records.len() as i32 - 1);
    buf.put_i64(base_ts);
    buf.put_i64(max_ts);
    buf.put_i64(-1);
    buf.put_i16(-1);
    buf.put_i32(-1);
    buf.put_i32(records.len() as i32);
    buf.put_slice(&body);
    let crc = crc32c::crc32c(&buf[crc_start..]);
    buf[crc_start - 4..crc_start].copy_from_slice(&crc.to_be_bytes());
    buf
}

/// The records at or after `from` in `bytes` (whole batches, as read from a log), and the
/// offset after the last batch (where the next read starts; `from` when none).
pub fn decode_records(bytes: &Bytes, from: i64) -> Result<(Vec<StoredRecord>, i64), String> {
    let mut out = Vec::new();
    let mut next = from;
    let mut pos = 0;
    while pos + BATCH_HEADER_LEN <= bytes.len() {
        let h = BatchHeader::parse(&bytes[pos..]).map_err(|e| e.to_string())?;
        let end = pos.checked_add(h.total_len()).filter(|e| *e <= bytes.len()).ok_or("a batch runs past the read")?;
        next = next.max(h.next_offset());
        if !h.is_control() {
            let (data, views) = batch_records(&h, &bytes[pos..end]).map_err(|e| e.to_string())?;
            for v in views.into_iter().filter(|v| v.offset >= from) {
                out.push(parse_record(&data[v.bytes.clone()], v.offset, v.timestamp)?);
            }
        }
        pos = end;
    }
    Ok((out, next))
}

fn take<'a>(rec: &'a [u8], pos: &mut usize) -> Result<Option<&'a [u8]>, String> {
    let len = read_varlong(rec, pos, 5).map_err(|e| e.to_string())?;
    if len < 0 {
        return Ok(None);
    }
    let start = *pos;
    let end = start.checked_add(len as usize).filter(|e| *e <= rec.len()).ok_or("a field runs past its record")?;
    *pos = end;
    Ok(Some(&rec[start..end]))
}

/// One record's fields; `rec` is the record with its length prefix.
fn parse_record(rec: &[u8], offset: i64, timestamp: i64) -> Result<StoredRecord, String> {
    let mut pos = 0;
    let e = |e: crate::storage::BatchError| e.to_string();
    read_varlong(rec, &mut pos, 5).map_err(e)?; // length
    pos += 1; // attributes
    read_varlong(rec, &mut pos, 10).map_err(e)?; // timestamp delta: given
    read_varlong(rec, &mut pos, 5).map_err(e)?; // offset delta: given
    let key = take(rec, &mut pos)?.map(Bytes::copy_from_slice);
    let value = take(rec, &mut pos)?.map(Bytes::copy_from_slice);
    let count = read_varlong(rec, &mut pos, 5).map_err(e)?;
    // Bounded by the record's bytes: a header takes at least 2.
    let mut headers = Vec::with_capacity((count.max(0) as usize).min(rec.len() / 2));
    for _ in 0..count.max(0) {
        let k = take(rec, &mut pos)?.ok_or("a header without a key")?;
        let v = take(rec, &mut pos)?.map(Bytes::copy_from_slice);
        headers.push((String::from_utf8_lossy(k).into_owned(), v));
    }
    Ok(StoredRecord { offset, timestamp, key, value, headers })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{set_base_offset, validate_batches};

    #[test]
    fn a_batch_is_valid_and_reads_back() {
        let recs = vec![
            NewRecord { key: Some(Bytes::from("k")), value: Some(Bytes::from("v")), headers: vec![], timestamp: 10 },
            NewRecord {
                key: None,
                value: None,
                headers: vec![("h".into(), Some(Bytes::from("1"))), ("h".into(), None)],
                timestamp: 7,
            },
        ];
        let mut batch = encode_batch(&recs);
        validate_batches(&batch, 1 << 20).unwrap();
        set_base_offset(&mut batch, 40);
        let bytes = batch.freeze();
        let (back, next) = decode_records(&bytes, 0).unwrap();
        assert_eq!(next, 42);
        assert_eq!(back.len(), 2);
        assert_eq!((back[0].offset, back[0].timestamp, back[0].key.clone()), (40, 10, Some(Bytes::from("k"))));
        assert_eq!((back[1].offset, back[1].timestamp, &back[1].headers), (41, 7, &recs[1].headers));
        assert_eq!(decode_records(&bytes, 41).unwrap().0.len(), 1);
    }
}
