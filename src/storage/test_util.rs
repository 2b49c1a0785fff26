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

/// One record, its length prefix included: `offset_delta` and `ts_delta` as given, no
/// headers.
pub fn encode_record(key: Option<&[u8]>, value: Option<&[u8]>, ts_delta: i64, offset_delta: i64) -> Vec<u8> {
    let mut body = vec![0u8]; // attributes
    put_varlong(&mut body, ts_delta);
    put_varlong(&mut body, offset_delta);
    put_bytes(&mut body, key);
    put_bytes(&mut body, value);
    put_varlong(&mut body, 0); // no headers
    let mut out = Vec::with_capacity(body.len() + 5);
    put_varlong(&mut out, body.len() as i64);
    out.extend_from_slice(&body);
    out
}

/// The fields of a batch header that tests choose.
#[derive(Debug, Clone, Copy)]
pub struct RawHeader {
    pub base_offset: i64,
    pub codec: u8,
    pub last_offset_delta: i32,
    pub base_ts: i64,
    pub max_ts: i64,
    pub producer_id: i64,
    pub records_count: i32,
}

/// A v2 batch around `section` (records as encoded, possibly compressed) with whatever
/// header fields `h` claims; the length and CRC are always right.
pub fn raw_batch(h: RawHeader, section: &[u8]) -> Vec<u8> {
    let (epoch, sequence) = if h.producer_id >= 0 { (0i16, 0i32) } else { (-1, -1) };
    let mut b = Vec::new();
    b.extend_from_slice(&h.base_offset.to_be_bytes());
    b.extend_from_slice(&((49 + section.len()) as i32).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    b.push(2); // magic
    b.extend_from_slice(&[0; 4]); // crc, filled below
    b.extend_from_slice(&i16::from(h.codec).to_be_bytes()); // attributes
    b.extend_from_slice(&h.last_offset_delta.to_be_bytes());
    b.extend_from_slice(&h.base_ts.to_be_bytes());
    b.extend_from_slice(&h.max_ts.to_be_bytes());
    b.extend_from_slice(&h.producer_id.to_be_bytes());
    b.extend_from_slice(&epoch.to_be_bytes());
    b.extend_from_slice(&sequence.to_be_bytes());
    b.extend_from_slice(&h.records_count.to_be_bytes());
    b.extend_from_slice(section);
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// An uncompressed v2 batch at `base_offset` holding `records` at consecutive offsets;
/// `producer_id` ≥ 0 makes it an idempotent producer's batch (epoch 0, base sequence 0).
pub fn build_records_batch(base_offset: i64, records: &[TestRecord], producer_id: i64) -> Vec<u8> {
    assert!(!records.is_empty());
    let base_ts = records[0].timestamp;
    let max_ts = records.iter().map(|r| r.timestamp).max().unwrap();
    let section: Vec<u8> =
        (0..).zip(records).flat_map(|(i, r)| encode_record(r.key, r.value, r.timestamp - base_ts, i)).collect();
    let n = records.len() as i32;
    let header =
        RawHeader { base_offset, codec: 0, last_offset_delta: n - 1, base_ts, max_ts, producer_id, records_count: n };
    raw_batch(header, &section)
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
    compressed_with(batch, crate::storage::batch::Compression::Gzip)
}

/// `batch` (uncompressed) with its record section compressed by `codec` as the Java
/// producer writes it (snappy in the xerial framing).
pub fn compressed_with(batch: &[u8], codec: crate::storage::batch::Compression) -> Vec<u8> {
    recompressed_section(batch, &crate::storage::codec::compress(codec, &batch[61..]).unwrap(), codec)
}

/// `batch` with its record section replaced by `section`, flagged as `codec`.
pub fn recompressed_section(batch: &[u8], section: &[u8], codec: crate::storage::batch::Compression) -> Vec<u8> {
    use crate::storage::batch::Compression;
    let id = match codec {
        Compression::None => 0,
        Compression::Gzip => 1,
        Compression::Snappy => 2,
        Compression::Lz4 => 3,
        Compression::Zstd => 4,
        Compression::Unknown(c) => c,
    };
    let mut out = batch[..61].to_vec();
    out.extend_from_slice(section);
    out[22] = (out[22] & !0x07) | id;
    let len = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

/// A small xorshift generator so the mutation test is reproducible on stable.
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// One to four random edits of `frame`: random, flipped and boundary bytes, huge
/// lengths, truncation, insertion, deletion, copies.
pub fn mutate(rng: &mut XorShift, frame: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(4) {
        if frame.is_empty() {
            return;
        }
        let at = rng.below(frame.len());
        match rng.below(8) {
            0 => frame[at] = rng.next() as u8,
            1 => frame[at] ^= 1 << rng.below(8),
            2 => frame[at] = [0x00, 0x7f, 0x80, 0xff][rng.below(4)],
            3 => {
                let huge: &[u8] = [&[0x7f, 0xff, 0xff, 0xff][..], &[0xff, 0xff, 0xff, 0xff, 0x0f]][rng.below(2)];
                for (i, b) in huge.iter().enumerate() {
                    if let Some(slot) = frame.get_mut(at + i) {
                        *slot = *b;
                    }
                }
            }
            4 => frame.truncate(at),
            5 => frame.insert(at, rng.next() as u8),
            6 => {
                frame.remove(at);
            }
            _ => {
                let to = rng.below(frame.len());
                frame[to] = frame[at];
            }
        }
    }
}
