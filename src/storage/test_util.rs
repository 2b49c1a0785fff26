//! Test helpers: hand-built v2 record batches with a correct CRC-32C.

fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        if z < 0x80 {
            out.push(z as u8);
            return;
        }
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
}

/// An uncompressed v2 batch at `base_offset` with one record per timestamp, each with a
/// null key and a `value_len`-byte value.
pub fn build_batch(base_offset: i64, timestamps: &[i64], value_len: usize) -> Vec<u8> {
    let values: Vec<Vec<u8>> = (0..timestamps.len()).map(|i| (0..value_len).map(|j| (i + j) as u8).collect()).collect();
    let records: Vec<TestRecord> = timestamps
        .iter()
        .zip(&values)
        .map(|(&ts, v)| TestRecord { key: None, value: Some(v), timestamp: ts })
        .collect();
    build_records_batch(base_offset, &records, -1)
}

/// One record for [`build_records_batch`].
#[derive(Debug, Clone, Copy)]
pub struct TestRecord<'a> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub timestamp: i64,
}

fn put_bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_varlong(out, -1),
        Some(b) => {
            put_varlong(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

/// An uncompressed v2 batch at `base_offset` holding `records` at consecutive offsets;
/// `producer_id` ≥ 0 makes it an idempotent producer's batch (epoch 0, base sequence 0).
pub fn build_records_batch(base_offset: i64, records: &[TestRecord], producer_id: i64) -> Vec<u8> {
    assert!(!records.is_empty());
    let base_ts = records[0].timestamp;
    let max_ts = records.iter().map(|r| r.timestamp).max().unwrap();
    let mut body_bytes = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let mut body = vec![0u8]; // attributes
        put_varlong(&mut body, r.timestamp - base_ts);
        put_varlong(&mut body, i as i64);
        put_bytes(&mut body, r.key);
        put_bytes(&mut body, r.value);
        put_varlong(&mut body, 0); // no headers
        put_varlong(&mut body_bytes, body.len() as i64);
        body_bytes.extend_from_slice(&body);
    }
    let n = records.len() as i32;
    let (epoch, sequence) = if producer_id >= 0 { (0i16, 0i32) } else { (-1, -1) };
    let mut b = Vec::new();
    b.extend_from_slice(&base_offset.to_be_bytes());
    b.extend_from_slice(&((49 + body_bytes.len()) as i32).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    b.push(2); // magic
    b.extend_from_slice(&[0; 4]); // crc, filled below
    b.extend_from_slice(&0i16.to_be_bytes()); // attributes
    b.extend_from_slice(&(n - 1).to_be_bytes());
    b.extend_from_slice(&base_ts.to_be_bytes());
    b.extend_from_slice(&max_ts.to_be_bytes());
    b.extend_from_slice(&producer_id.to_be_bytes());
    b.extend_from_slice(&epoch.to_be_bytes());
    b.extend_from_slice(&sequence.to_be_bytes());
    b.extend_from_slice(&n.to_be_bytes());
    b.extend_from_slice(&body_bytes);
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// Sets the compression bits (pretending the records are compressed) and fixes the CRC.
pub fn mark_compressed(batch: &mut [u8]) {
    batch[22] |= 0x01;
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// `batch` with its record section really gzip-compressed (attributes, length and CRC
/// updated).
pub fn gzipped(batch: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&batch[61..]).unwrap();
    let mut out = batch[..61].to_vec();
    out.extend_from_slice(&gz.finish().unwrap());
    out[22] |= 0x01;
    let len = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}
