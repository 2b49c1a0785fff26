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
    assert!(!timestamps.is_empty());
    let base_ts = timestamps[0];
    let max_ts = *timestamps.iter().max().unwrap();
    let mut records = Vec::new();
    for (i, ts) in timestamps.iter().enumerate() {
        let mut body = vec![0u8]; // attributes
        put_varlong(&mut body, ts - base_ts);
        put_varlong(&mut body, i as i64);
        put_varlong(&mut body, -1); // null key
        put_varlong(&mut body, value_len as i64);
        body.extend((0..value_len).map(|j| (i + j) as u8));
        put_varlong(&mut body, 0); // no headers
        put_varlong(&mut records, body.len() as i64);
        records.extend_from_slice(&body);
    }
    let n = timestamps.len() as i32;
    let mut b = Vec::new();
    b.extend_from_slice(&base_offset.to_be_bytes());
    b.extend_from_slice(&((49 + records.len()) as i32).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    b.push(2); // magic
    b.extend_from_slice(&[0; 4]); // crc, filled below
    b.extend_from_slice(&0i16.to_be_bytes()); // attributes
    b.extend_from_slice(&(n - 1).to_be_bytes());
    b.extend_from_slice(&base_ts.to_be_bytes());
    b.extend_from_slice(&max_ts.to_be_bytes());
    b.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
    b.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    b.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    b.extend_from_slice(&n.to_be_bytes());
    b.extend_from_slice(&records);
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
