//! Validating a compressed batch takes memory for the codec's state, not for what the
//! batch inflates to: a 60 MiB record (under the 64 MiB cap) compressed into a few KiB
//! is walked as it is decompressed. Before, the whole record section was inflated into
//! one growing buffer (over 64 MiB at its peak per batch; four concurrent such produces
//! peaked at over 700 MB of RSS in the adversarial pass).
//!
//! Alone in its binary: it reads this process's peak resident memory (`VmHWM`, reset
//! through `/proc/self/clear_refs`), which other tests would move.

mod common;

use std::io::Write;

use common::batches::{batch, Rec};
use runnel::storage::{validate_produce_batch, BatchHeader, TimestampBounds, BATCH_HEADER_LEN};

/// A field of `/proc/self/status`, in KiB.
fn status_kib(field: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("{field} in {status}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

const VALUE_BYTES: usize = 60 << 20;
const ATTRIBUTES: usize = 21;
const BATCH_LENGTH: usize = 8;

/// `plain` with its record section compressed by `compress` and the header saying
/// `codec` (the CRC is not checked by this validation).
fn recompressed(plain: &[u8], codec: u16, compress: impl FnOnce(&[u8]) -> Vec<u8>) -> Vec<u8> {
    let mut out = plain[..BATCH_HEADER_LEN].to_vec();
    out.extend_from_slice(&compress(&plain[BATCH_HEADER_LEN..]));
    let length = (out.len() - 12) as i32;
    out[BATCH_LENGTH..BATCH_LENGTH + 4].copy_from_slice(&length.to_be_bytes());
    let attributes = u16::from_be_bytes([out[ATTRIBUTES], out[ATTRIBUTES + 1]]) | codec;
    out[ATTRIBUTES..ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    out
}

#[test]
fn a_compressed_bomb_is_validated_without_inflating_it_whole() {
    let bounds = TimestampBounds { now_ms: 0, before_max_ms: i64::MAX, after_max_ms: i64::MAX };
    let plain = batch(&[Rec::value(&"\0".repeat(VALUE_BYTES))]).to_vec();
    let gzip = recompressed(&plain, 1, |s| {
        let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        w.write_all(s).unwrap();
        w.finish().unwrap()
    });
    let lz4 = recompressed(&plain, 3, |s| {
        let mut w = lz4_flex::frame::FrameEncoder::new(Vec::new());
        w.write_all(s).unwrap();
        w.finish().unwrap()
    });
    drop(plain);
    for (codec, bomb) in [("gzip", gzip), ("lz4", lz4)] {
        assert!(bomb.len() < VALUE_BYTES / 100, "{codec}: a bomb ({} bytes)", bomb.len());
        let header = BatchHeader::parse(&bomb).unwrap();
        // The peak resident size starts again from the resident size now.
        std::fs::write("/proc/self/clear_refs", "5").unwrap();
        let before = status_kib("VmRSS:");
        let validated = validate_produce_batch(&header, &bomb, &bounds, false);
        let grew_kib = status_kib("VmHWM:").saturating_sub(before);
        assert!(validated.is_ok(), "{codec}: {validated:?}");
        assert!(grew_kib < 8 << 10, "{codec}: validating grew the resident memory by {grew_kib} KiB at its peak");
    }
}
