//! Bounded decompression of a batch's record section (Produce validation looks inside
//! every compressed batch; the log cleaner rewrites them), and compression back with the
//! same codec for the cleaner. Fetch never decompresses.
//!
//! Kafka's codecs: gzip (one or more gzip members), snappy (the xerial framing Java
//! producers write, or a raw snappy block as librdkafka writes), LZ4 frames and zstd
//! frames. The output is capped: a batch that would inflate beyond `max_bytes` is refused
//! rather than allocated, so a hostile producer cannot make the cleaner exhaust memory.

use std::io::{Read, Write};

use super::batch::Compression;

/// Why a record section was not decompressed.
#[derive(Debug, thiserror::Error)]
pub enum DecompressError {
    #[error("codec {0:?} is not supported")]
    Unsupported(Compression),
    #[error("decompressed data exceeds {0} bytes")]
    TooLarge(usize),
    #[error("corrupt compressed data: {0}")]
    Corrupt(String),
}

/// The smallest window cap for zstd frames (zstd's level 19 uses 8 MiB windows).
const ZSTD_MIN_WINDOW_CAP: usize = 8 << 20;
/// Kafka's default `compression.zstd.level`.
const ZSTD_LEVEL: i32 = 3;

/// The base-2 log of the smallest power of two ≥ `bytes`, within what zstd accepts.
fn window_log(bytes: usize) -> u32 {
    bytes.next_power_of_two().trailing_zeros().clamp(10, 31)
}

const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
/// Magic, version and compatible version.
const XERIAL_HEADER_LEN: usize = 16;

/// Decompresses `data` (a batch's bytes after its header) into at most `max_bytes`.
pub fn decompress(codec: Compression, data: &[u8], max_bytes: usize) -> Result<Vec<u8>, DecompressError> {
    let mut out = Vec::new();
    decompressor(codec, data, max_bytes)?.read_to_end(&mut out).map_err(from_io)?;
    Ok(out)
}

/// `data` (a batch's bytes after its header) decompressed as it is read, at most
/// `max_bytes` of it: reading past that fails with [`DecompressError::TooLarge`] (inside
/// the `io::Error`; [`from_io`] takes it out). What it holds is the codec's state and, for
/// snappy, one block: a reader that walks the output (Produce validation) needs no
/// memory for the whole of it, however far a batch inflates.
pub fn decompressor<'a>(
    codec: Compression,
    data: &'a [u8],
    max_bytes: usize,
) -> Result<Box<dyn Read + Send + 'a>, DecompressError> {
    let capped = |r: Box<dyn Read + Send + 'a>| -> Box<dyn Read + Send + 'a> {
        Box::new(Capped { inner: r, left: max_bytes, max: max_bytes })
    };
    Ok(match codec {
        Compression::None => capped(Box::new(data)),
        Compression::Gzip => capped(Box::new(flate2::read::MultiGzDecoder::new(data))),
        Compression::Lz4 => capped(Box::new(lz4_flex::frame::FrameDecoder::new(data))),
        Compression::Zstd => {
            // A frame's window (what the decoder reserves) is capped like the output, but
            // not below 8 MiB: encoders size windows by level, not by the content.
            let mut decoder = zstd::stream::read::Decoder::with_buffer(data).map_err(corrupt)?;
            decoder.window_log_max(window_log(max_bytes.max(ZSTD_MIN_WINDOW_CAP))).map_err(corrupt)?;
            capped(Box::new(decoder))
        }
        Compression::Snappy => Box::new(SnappyReader::new(data, max_bytes)),
        Compression::Unknown(_) => return Err(DecompressError::Unsupported(codec)),
    })
}

/// The [`DecompressError`] an error of a [`decompressor`]'s reader stands for.
pub fn from_io(e: std::io::Error) -> DecompressError {
    match e.get_ref().and_then(|inner| inner.downcast_ref::<DecompressError>()) {
        Some(DecompressError::TooLarge(max)) => DecompressError::TooLarge(*max),
        _ => corrupt(e),
    }
}

fn too_large(max: usize) -> std::io::Error {
    std::io::Error::other(DecompressError::TooLarge(max))
}

/// At most `max` bytes of `inner`.
struct Capped<R> {
    inner: R,
    left: usize,
    max: usize,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        // One byte more than is left tells "exactly at the cap" from "past it".
        let want = buf.len().min(self.left.saturating_add(1));
        let n = self.inner.read(&mut buf[..want])?;
        if n > self.left {
            return Err(too_large(self.max));
        }
        self.left -= n;
        Ok(n)
    }
}

/// Snappy as Kafka's clients write it, one block at a time: the xerial framing of the
/// Java client (length-prefixed blocks of 32 KiB after a 16-byte header), or one raw
/// block (librdkafka). A block's stated length is checked against what is left of the
/// cap before anything is allocated for it.
struct SnappyReader<'a> {
    /// Blocks not decompressed yet (after the xerial header, when there is one).
    rest: &'a [u8],
    xerial: bool,
    block: Vec<u8>,
    at: usize,
    left: usize,
    max: usize,
}

impl<'a> SnappyReader<'a> {
    fn new(data: &'a [u8], max: usize) -> SnappyReader<'a> {
        let xerial = data.len() >= XERIAL_HEADER_LEN && data[..8] == XERIAL_MAGIC;
        let rest = if xerial { &data[XERIAL_HEADER_LEN..] } else { data };
        SnappyReader { rest, xerial, block: Vec::new(), at: 0, left: max, max }
    }

    /// Decompresses the next block into `block`; false when there is none.
    fn next_block(&mut self) -> std::io::Result<bool> {
        if self.rest.is_empty() {
            return Ok(false);
        }
        let bad = |e: &dyn std::fmt::Display| std::io::Error::other(corrupt(e));
        let compressed = if self.xerial {
            let len_bytes: [u8; 4] =
                self.rest.get(..4).and_then(|b| b.try_into().ok()).ok_or_else(|| bad(&"torn block"))?;
            let len = u32::from_be_bytes(len_bytes) as usize;
            let block = self.rest.get(4..4 + len).ok_or_else(|| bad(&"block runs past the data"))?;
            self.rest = &self.rest[4 + len..];
            block
        } else {
            std::mem::take(&mut self.rest)
        };
        let len = snap::raw::decompress_len(compressed).map_err(|e| bad(&e))?;
        if len > self.left {
            return Err(too_large(self.max));
        }
        self.block.clear();
        self.block.resize(len, 0);
        let n = snap::raw::Decoder::new().decompress(compressed, &mut self.block).map_err(|e| bad(&e))?;
        self.block.truncate(n);
        self.left -= n;
        self.at = 0;
        Ok(true)
    }
}

impl Read for SnappyReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.block.len() {
            if !self.next_block()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.block.len() - self.at);
        buf[..n].copy_from_slice(&self.block[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Compresses a record section with `codec` as Kafka's Java producer does (snappy in
/// the xerial framing); `None` for a codec runnel cannot write or on failure.
pub fn compress(codec: Compression, data: &[u8]) -> Option<Vec<u8>> {
    match codec {
        Compression::None => Some(data.to_vec()),
        Compression::Gzip => {
            let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            w.write_all(data).ok()?;
            w.finish().ok()
        }
        Compression::Lz4 => {
            let mut w = lz4_flex::frame::FrameEncoder::new(Vec::new());
            w.write_all(data).ok()?;
            w.finish().ok()
        }
        Compression::Zstd => zstd::bulk::compress(data, ZSTD_LEVEL).ok(),
        Compression::Snappy => {
            let mut out = XERIAL_MAGIC.to_vec();
            out.extend_from_slice(&1i32.to_be_bytes()); // version
            out.extend_from_slice(&1i32.to_be_bytes()); // compatible version
            let mut encoder = snap::raw::Encoder::new();
            for chunk in data.chunks(XERIAL_BLOCK) {
                let block = encoder.compress_vec(chunk).ok()?;
                out.extend_from_slice(&u32::try_from(block.len()).ok()?.to_be_bytes());
                out.extend_from_slice(&block);
            }
            Some(out)
        }
        Compression::Unknown(_) => None,
    }
}

/// Uncompressed bytes per xerial block (the Java library's default block size).
const XERIAL_BLOCK: usize = 32 * 1024;

fn corrupt(e: impl std::fmt::Display) -> DecompressError {
    DecompressError::Corrupt(e.to_string())
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn sample() -> Vec<u8> {
        (0..10_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect()
    }

    #[test]
    fn every_codec_round_trips_and_is_capped() {
        let plain = sample();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&plain).unwrap();
        let gzip = gz.finish().unwrap();
        let mut lz = lz4_flex::frame::FrameEncoder::new(Vec::new());
        lz.write_all(&plain).unwrap();
        let lz4 = lz.finish().unwrap();
        let raw_snappy = snap::raw::Encoder::new().compress_vec(&plain).unwrap();
        let mut xerial = XERIAL_MAGIC.to_vec();
        xerial.extend_from_slice(&1i32.to_be_bytes());
        xerial.extend_from_slice(&1i32.to_be_bytes());
        for chunk in plain.chunks(16_000) {
            let block = snap::raw::Encoder::new().compress_vec(chunk).unwrap();
            xerial.extend_from_slice(&(block.len() as u32).to_be_bytes());
            xerial.extend_from_slice(&block);
        }
        let zstd = ruzstd::encoding::compress_to_vec(plain.as_slice(), ruzstd::encoding::CompressionLevel::Fastest);
        for (codec, data) in [
            (Compression::Gzip, &gzip),
            (Compression::Lz4, &lz4),
            (Compression::Snappy, &raw_snappy),
            (Compression::Snappy, &xerial),
            (Compression::Zstd, &zstd),
        ] {
            assert_eq!(decompress(codec, data, plain.len()).unwrap(), plain, "{codec:?}");
            assert!(
                matches!(decompress(codec, data, plain.len() - 1), Err(DecompressError::TooLarge(_))),
                "{codec:?} is capped"
            );
            assert!(decompress(codec, &data[..data.len() / 2], plain.len()).is_err(), "{codec:?} torn");
        }
        assert!(decompress(Compression::Unknown(7), &gzip, 1 << 20).is_err());
        for codec in [Compression::Gzip, Compression::Lz4, Compression::Snappy, Compression::Zstd] {
            let packed = compress(codec, &plain).unwrap();
            assert!(packed.len() < plain.len(), "{codec:?} compresses");
            assert_eq!(decompress(codec, &packed, plain.len()).unwrap(), plain, "{codec:?}");
        }
    }

    /// A zstd frame that declares a window beyond the cap is refused before the decoder
    /// reserves it; the same data in a small window decodes.
    #[test]
    fn zstd_windows_beyond_the_cap_are_refused() {
        let plain = sample();
        let frame = |log: u32| {
            let mut w = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
            w.include_contentsize(false).unwrap();
            w.window_log(log).unwrap();
            w.write_all(&plain).unwrap();
            w.finish().unwrap()
        };
        // 32 MiB: above the 8 MiB cap that a 1 MiB output limit gets, below libzstd's own
        // default limit (128 MiB), so only the cap refuses it.
        let huge = frame(25);
        let got = decompress(Compression::Zstd, &huge, 1 << 20);
        assert!(matches!(got, Err(DecompressError::Corrupt(_))), "{got:?}");
        assert_eq!(decompress(Compression::Zstd, &frame(20), 1 << 20).unwrap(), plain);
    }
}
