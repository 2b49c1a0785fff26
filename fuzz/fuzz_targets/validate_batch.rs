//! Arbitrary record sections inside a v2 batch, uncompressed or compressed with each of
//! Kafka's codecs, through Produce validation. Validation may refuse; it must never
//! panic or allocate beyond `-malloc_limit_mb`, and whatever it accepts the log's own
//! record reader must read as exactly the records the header counts, at consecutive
//! offsets (a lying count would give two records one offset).
//!
//! Input: byte 0 picks the codec (low 3 bits, 0-4) and whether the rest is the record
//! section to compress (bit 3 clear) or already-compressed bytes taken as they are (bit 3
//! set); byte 1 is the record count the header claims (1-16); the rest is the section.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runnel::storage::batch::Compression;
use runnel::storage::codec::compress;
use runnel::storage::record::batch_records;
use runnel::storage::{validate_produce_batch, BatchHeader, TimestampBounds};

const ANY_TIME: TimestampBounds = TimestampBounds { now_ms: 0, before_max_ms: i64::MAX, after_max_ms: i64::MAX };
const CODECS: [Compression; 5] =
    [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

/// A v2 batch header claiming `count` records around `section`, codec id `codec`.
fn batch(section: &[u8], count: i32, codec: u8) -> Vec<u8> {
    let mut b = Vec::with_capacity(61 + section.len());
    b.extend_from_slice(&0i64.to_be_bytes()); // base offset
    b.extend_from_slice(&((49 + section.len()) as i32).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    b.push(2); // magic
    b.extend_from_slice(&[0; 4]); // crc, filled below
    b.extend_from_slice(&i16::from(codec).to_be_bytes());
    b.extend_from_slice(&(count - 1).to_be_bytes()); // last offset delta
    b.extend_from_slice(&1i64.to_be_bytes()); // base timestamp
    b.extend_from_slice(&1i64.to_be_bytes()); // max timestamp
    b.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
    b.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    b.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    b.extend_from_slice(&count.to_be_bytes());
    b.extend_from_slice(section);
    let crc = crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// CRC-32C (Castagnoli), bitwise: the fuzz target needs no speed here.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}

fuzz_target!(|input: &[u8]| {
    let [mode, count, section @ ..] = input else { return };
    let codec_id = (mode & 0x07) % 5;
    let codec = CODECS[usize::from(codec_id)];
    let count = i32::from(count % 16) + 1;
    let section = if mode & 0x08 == 0 && codec != Compression::None {
        match compress(codec, section) {
            Some(packed) => packed,
            None => return,
        }
    } else {
        section.to_vec()
    };
    let b = batch(&section, count, codec_id);
    let header = BatchHeader::parse(&b).expect("a whole header");
    if validate_produce_batch(&header, &b, &ANY_TIME, false).is_ok() {
        let (_, records) = batch_records(&header, &b).expect("a validated batch reads back");
        assert_eq!(records.len(), count as usize);
        for (i, r) in records.iter().enumerate() {
            assert_eq!(r.offset, i as i64);
        }
    }
});
