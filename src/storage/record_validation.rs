//! Produce-time validation of what is inside a batch, as Kafka's log validator does, so
//! that nothing a consumer cannot decode is ever stored and every offset the header
//! claims names exactly one record.
//!
//! Every record is walked, in compressed batches too: its length, attributes, timestamp
//! delta, offset delta (must be 0, 1, 2, … in order), key, value and headers must fill the
//! record exactly, the record count must match the header, and the records must fill the
//! record section exactly. A compressed record section is walked as it is decompressed,
//! through a small buffer, so validating it takes the codec's state and no more whatever
//! it inflates to (bounded by [`MAX_DECOMPRESSED_BYTES`]); before, the whole section was
//! inflated first, and four concurrent 64 MiB bombs peaked at over 700 MB of RSS. The
//! caller runs it off the async workers. What is stored is still the batch as received:
//! nothing is recompressed.

use std::io::{BufRead, BufReader};

use super::batch::{BatchError, BatchHeader, Compression, BATCH_HEADER_LEN};
use super::codec::{decompressor, from_io, DecompressError};
use super::record::MAX_DECOMPRESSED_BYTES;

/// The buffer a compressed section is walked through.
const STREAM_BUFFER: usize = 64 * 1024;

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

/// A record section read front to back: in place ([`Cursor`]) or as a decompressor
/// produces it ([`Stream`]).
trait Section {
    /// Bytes read so far.
    fn pos(&self) -> usize;
    /// The next byte; `None` at the end of the section.
    fn next_byte(&mut self) -> Result<Option<u8>, BatchError>;
    /// Skips `n` bytes; false when the section ends first.
    fn skip(&mut self, n: usize) -> Result<bool, BatchError>;
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Section for Cursor<'_> {
    fn pos(&self) -> usize {
        self.pos
    }

    fn next_byte(&mut self) -> Result<Option<u8>, BatchError> {
        let b = self.buf.get(self.pos).copied();
        self.pos += usize::from(b.is_some());
        Ok(b)
    }

    fn skip(&mut self, n: usize) -> Result<bool, BatchError> {
        match self.pos.checked_add(n).filter(|e| *e <= self.buf.len()) {
            Some(end) => {
                self.pos = end;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// A compressed section as its decompressor yields it.
struct Stream<R> {
    reader: BufReader<R>,
    pos: usize,
}

impl<R: std::io::Read> Stream<R> {
    fn fill(&mut self) -> Result<&[u8], BatchError> {
        self.reader.fill_buf().map_err(|e| decompress_error(from_io(e)))
    }
}

impl<R: std::io::Read> Section for Stream<R> {
    fn pos(&self) -> usize {
        self.pos
    }

    fn next_byte(&mut self) -> Result<Option<u8>, BatchError> {
        let Some(&b) = self.fill()?.first() else { return Ok(None) };
        self.reader.consume(1);
        self.pos += 1;
        Ok(Some(b))
    }

    fn skip(&mut self, mut n: usize) -> Result<bool, BatchError> {
        while n > 0 {
            let available = self.fill()?.len();
            if available == 0 {
                return Ok(false);
            }
            let step = available.min(n);
            self.reader.consume(step);
            self.pos += step;
            n -= step;
        }
        Ok(true)
    }
}

fn decompress_error(e: DecompressError) -> BatchError {
    match e {
        DecompressError::TooLarge(max) => BatchError::DecompressedTooLarge { max },
        DecompressError::Unsupported(_) | DecompressError::Corrupt(_) => BatchError::CorruptCompression(e.to_string()),
    }
}

/// One record's fields, read within its length (`end`, a section position).
struct Record<'s, S> {
    section: &'s mut S,
    end: usize,
}

impl<S: Section> Record<'_, S> {
    fn byte(&mut self) -> Result<u8, BatchError> {
        if self.section.pos() >= self.end {
            return Err(BatchError::MalformedRecord("record too short"));
        }
        self.section.next_byte()?.ok_or(BatchError::MalformedRecord("record runs past the batch"))
    }

    /// A zigzag varint of at most `max_bytes` bytes.
    fn varlong(&mut self, max_bytes: usize) -> Result<i64, BatchError> {
        let mut raw: u64 = 0;
        for i in 0..max_bytes {
            let byte = self.byte()?;
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

    /// A varint length (-1 = null where `nullable`) followed by that many bytes. Returns
    /// whether it was null.
    fn skip_sized(&mut self, nullable: bool) -> Result<bool, BatchError> {
        let len = self.varint()?;
        if len == -1 && nullable {
            return Ok(true);
        }
        let len = usize::try_from(len).map_err(|_| BatchError::MalformedRecord("negative length"))?;
        let pos = self.section.pos();
        if pos.checked_add(len).is_none_or(|e| e > self.end) {
            return Err(BatchError::MalformedRecord("field runs past the record"));
        }
        if !self.section.skip(len)? {
            return Err(BatchError::MalformedRecord("record runs past the batch"));
        }
        Ok(false)
    }
}

/// Does the batch's record section need decompressing to be validated? Such batches are
/// validated on the bounded blocking pool rather than on an async worker.
pub fn needs_decompression(header: &BatchHeader) -> bool {
    !matches!(header.compression(), Compression::None | Compression::Unknown(_))
}

/// Check one batch of a Produce request. `batch` is the whole batch, header included.
/// `require_keys` (compacted topics): every record must have a key. Returns the largest
/// record timestamp (what the header's max timestamp must say for CreateTime).
pub fn validate_produce_batch(
    header: &BatchHeader,
    batch: &[u8],
    bounds: &TimestampBounds,
    require_keys: bool,
) -> Result<i64, BatchError> {
    if let Compression::Unknown(c) = header.compression() {
        return Err(BatchError::UnsupportedCompression(c));
    }
    if header.records_count == 0 {
        return Err(BatchError::InvalidRecord("a record batch must hold at least one record"));
    }
    if i64::from(header.last_offset_delta) != i64::from(header.records_count) - 1 {
        return Err(BatchError::InvalidRecord("last offset delta does not match the record count"));
    }
    let end = header.total_len().min(batch.len());
    let section = &batch[BATCH_HEADER_LEN.min(end)..end];
    match header.compression() {
        Compression::None => walk_records(header, &mut Cursor { buf: section, pos: 0 }, bounds, require_keys),
        codec => {
            let reader = decompressor(codec, section, MAX_DECOMPRESSED_BYTES).map_err(decompress_error)?;
            let mut stream = Stream { reader: BufReader::with_capacity(STREAM_BUFFER, reader), pos: 0 };
            walk_records(header, &mut stream, bounds, require_keys)
        }
    }
}

/// Walks the `header.records_count` records of a record section, which they must fill
/// exactly. Returns the largest record timestamp.
fn walk_records<S: Section>(
    header: &BatchHeader,
    section: &mut S,
    bounds: &TimestampBounds,
    require_keys: bool,
) -> Result<i64, BatchError> {
    let check_ts = !header.uses_log_append_time();
    // Bounded by the records actually present (each takes at least one byte).
    let mut keyless = Vec::new();
    let mut max_timestamp = i64::MIN;
    for expected_delta in 0..header.records_count {
        let start = section.pos();
        // The length prefix: its own bytes bound only by the section.
        let mut prefix = Record { section: &mut *section, end: usize::MAX };
        let length = match prefix.varint() {
            Err(BatchError::MalformedRecord("record runs past the batch")) if prefix.section.pos() == start => {
                return Err(BatchError::InvalidRecord("fewer records in the batch than its header counts"));
            }
            Err(BatchError::MalformedRecord("record runs past the batch")) => {
                return Err(BatchError::MalformedRecord("varint runs past the batch"));
            }
            other => other?,
        };
        let length = usize::try_from(length).map_err(|_| BatchError::MalformedRecord("negative record length"))?;
        let body_end =
            section.pos().checked_add(length).ok_or(BatchError::MalformedRecord("record runs past the batch"))?;
        let mut r = Record { section: &mut *section, end: body_end };
        r.byte()?; // attributes
        let ts_delta = r.varlong(10)?;
        let offset_delta = r.varint()?;
        if offset_delta != i64::from(expected_delta) {
            return Err(BatchError::InvalidRecord("record offset deltas are not consecutive from 0"));
        }
        if r.skip_sized(true)? && require_keys {
            keyless.push(expected_delta);
        }
        r.skip_sized(true)?; // value
        let headers = r.varint()?;
        if headers < 0 {
            return Err(BatchError::MalformedRecord("negative header count"));
        }
        for _ in 0..headers {
            r.skip_sized(false)?; // header key
            r.skip_sized(true)?; // header value
        }
        if section.pos() != body_end {
            return Err(BatchError::InvalidRecord("record fields do not fill the record length"));
        }
        let ts = header.base_timestamp.wrapping_add(ts_delta);
        if check_ts {
            bounds.check(ts)?;
        }
        max_timestamp = max_timestamp.max(ts);
    }
    if section.next_byte()?.is_some() {
        return Err(BatchError::InvalidRecord("more bytes in the batch than its header counts records"));
    }
    if !keyless.is_empty() {
        return Err(BatchError::RecordsWithoutKey(keyless));
    }
    Ok(max_timestamp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::record::batch_records;
    use crate::storage::test_util::{
        build_records_batch, compressed_with, encode_record, gzipped, mutate, raw_batch, recompressed_section,
        RawHeader, TestRecord, XorShift,
    };

    const ANY_TIME: TimestampBounds = TimestampBounds { now_ms: 0, before_max_ms: i64::MAX, after_max_ms: i64::MAX };
    const CODECS: [Compression; 5] =
        [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

    fn batch(keys: &[Option<&'static [u8]>]) -> Vec<u8> {
        let records: Vec<TestRecord> =
            keys.iter().map(|&key| TestRecord { key, value: Some(b"v"), timestamp: 1 }).collect();
        build_records_batch(0, &records, -1)
    }

    fn check(b: &[u8]) -> Result<(), BatchError> {
        let h = BatchHeader::parse(b).unwrap();
        validate_produce_batch(&h, b, &ANY_TIME, false).map(|_| ())
    }

    /// A batch claiming `count` records around `section` (plain records), compressed by `codec`.
    fn lying(section: &[u8], count: i32, codec: Compression) -> Vec<u8> {
        let h = RawHeader {
            base_offset: 0,
            codec: 0,
            last_offset_delta: count - 1,
            base_ts: 1,
            max_ts: 1,
            producer_id: -1,
            records_count: count,
        };
        compressed_with(&raw_batch(h, section), codec)
    }

    fn rec(offset_delta: i64) -> Vec<u8> {
        encode_record(None, Some(b"value"), 0, offset_delta)
    }

    fn recs(deltas: &[i64]) -> Vec<u8> {
        deltas.iter().flat_map(|d| rec(*d)).collect()
    }

    #[test]
    fn honest_batches_pass_in_every_codec() {
        for codec in CODECS {
            assert_eq!(check(&lying(&recs(&[0, 1, 2]), 3, codec)), Ok(()), "{codec:?}");
        }
    }

    #[test]
    fn record_counts_must_match_the_header_in_every_codec() {
        for codec in CODECS {
            // Three records where the header says two: the third would take the offset of
            // the next produce. Three where it says five: offsets would be skipped.
            let more = check(&lying(&recs(&[0, 1, 2]), 2, codec));
            assert!(matches!(more, Err(BatchError::InvalidRecord(_))), "{codec:?}: {more:?}");
            let fewer = check(&lying(&recs(&[0, 1, 2]), 5, codec));
            assert!(matches!(fewer, Err(BatchError::InvalidRecord(_))), "{codec:?}: {fewer:?}");
        }
    }

    #[test]
    fn malformed_records_are_refused_in_every_codec() {
        let overrun = {
            // The second record's length claims more bytes than the section holds.
            let mut s = rec(0);
            let mut second = rec(1);
            second[0] = 100 << 1; // zigzag varint 100
            s.extend_from_slice(&second);
            s
        };
        let torn = {
            let mut s = recs(&[0, 1]);
            s.truncate(s.len() - 3);
            s
        };
        let bad_varint = {
            let mut s = rec(0);
            s.push(0x0c);
            s.push(0);
            s.extend_from_slice(&[0xff; 11]); // a timestamp delta varint that never ends
            s
        };
        let trailing = {
            let mut s = recs(&[0, 1]);
            s.extend_from_slice(&[0, 0]);
            s
        };
        for codec in CODECS {
            for (what, section, count) in [
                ("overrun", &overrun, 2),
                ("torn", &torn, 2),
                ("bad varint", &bad_varint, 2),
                ("trailing", &trailing, 2),
            ] {
                let got = check(&lying(section, count, codec));
                assert!(
                    matches!(got, Err(BatchError::MalformedRecord(_) | BatchError::InvalidRecord(_))),
                    "{codec:?} {what}: {got:?}"
                );
            }
            for deltas in [[0, 2, 1], [0, 1, 3], [1, 2, 3]] {
                let got = check(&lying(&recs(&deltas), 3, codec));
                assert!(matches!(got, Err(BatchError::InvalidRecord(_))), "{codec:?} {deltas:?}: {got:?}");
            }
        }
    }

    #[test]
    fn undecodable_compressed_data_is_refused() {
        let plain = lying(&recs(&[0, 1]), 2, Compression::None);
        let junk: Vec<u8> = (0..64u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8).collect();
        for codec in &CODECS[1..] {
            let b = recompressed_section(&plain, &junk, *codec);
            assert!(matches!(check(&b), Err(BatchError::CorruptCompression(_))), "{codec:?}");
            // Half of a real compressed section.
            let real = compressed_with(&plain, *codec);
            let torn = recompressed_section(&plain, &real[61..real.len() - (real.len() - 61) / 2], *codec);
            assert!(check(&torn).is_err(), "{codec:?} torn");
        }
        // librdkafka's raw snappy block framing is read too.
        let raw = snap::raw::Encoder::new().compress_vec(&plain[61..]).unwrap();
        assert_eq!(check(&recompressed_section(&plain, &raw, Compression::Snappy)), Ok(()));
    }

    #[test]
    fn a_batch_that_inflates_past_the_cap_is_too_large() {
        let big = vec![0u8; MAX_DECOMPRESSED_BYTES + 1];
        let section: Vec<u8> = encode_record(None, Some(&big), 0, 0);
        let b = lying(&section, 1, Compression::Gzip);
        assert!(b.len() < 1 << 20, "the test batch itself is small");
        assert!(matches!(check(&b), Err(BatchError::DecompressedTooLarge { .. })));
    }

    #[test]
    fn timestamps_inside_compressed_batches_are_checked() {
        let bounds = TimestampBounds { now_ms: 1_000_000, before_max_ms: 1_000, after_max_ms: 1_000 };
        let mut section = encode_record(None, Some(b"a"), 0, 0);
        // The second record is far in the future; the header's max timestamp does not say so.
        section.extend_from_slice(&encode_record(None, Some(b"b"), 10_000_000, 1));
        let h = RawHeader {
            base_offset: 0,
            codec: 0,
            last_offset_delta: 1,
            base_ts: 1_000_000,
            max_ts: 1_000_000,
            producer_id: -1,
            records_count: 2,
        };
        for codec in CODECS {
            let b = compressed_with(&raw_batch(h, &section), codec);
            let parsed = BatchHeader::parse(&b).unwrap();
            let got = validate_produce_batch(&parsed, &b, &bounds, false);
            assert!(matches!(got, Err(BatchError::InvalidTimestamp { .. })), "{codec:?}: {got:?}");
        }
    }

    #[test]
    fn compacted_topics_need_keys_in_compressed_batches_too() {
        for compress in [false, true] {
            let prepare = |b: Vec<u8>| if compress { gzipped(&b) } else { b };
            let keyed = prepare(batch(&[Some(b"a"), Some(b"b")]));
            let h = BatchHeader::parse(&keyed).unwrap();
            assert_eq!(validate_produce_batch(&h, &keyed, &ANY_TIME, true), Ok(1));
            let mixed = prepare(batch(&[Some(b"a"), None, Some(b"c"), None]));
            let h = BatchHeader::parse(&mixed).unwrap();
            assert_eq!(
                validate_produce_batch(&h, &mixed, &ANY_TIME, true),
                Err(BatchError::RecordsWithoutKey(vec![1, 3]))
            );
            // Only compacted topics require keys.
            assert_eq!(validate_produce_batch(&h, &mixed, &ANY_TIME, false), Ok(1));
        }
        // A batch flagged compressed whose data does not decompress is refused everywhere.
        let mut bogus = batch(&[Some(b"a")]);
        crate::storage::test_util::mark_compressed(&mut bogus);
        let h = BatchHeader::parse(&bogus).unwrap();
        for require_keys in [true, false] {
            let got = validate_produce_batch(&h, &bogus, &ANY_TIME, require_keys);
            assert!(matches!(got, Err(BatchError::CorruptCompression(_))), "{got:?}");
        }
    }

    /// What validation passes, the log's own record reader (cleaner, timestamp lookups)
    /// reads as exactly the records the header counts, at consecutive offsets; nothing
    /// panics on the way. Seeded mutations of the records before compression and of the
    /// compressed bytes; the cargo-fuzz target `validate_batch` explores the same property
    /// without a budget.
    #[test]
    fn random_batches_never_panic_and_what_passes_reads_back() {
        let mut rng = XorShift(0x0ba7_c4e5_5eed_f00d);
        let seeds: Vec<(Vec<u8>, i32)> = (1..6)
            .map(|n| {
                let section = (0..n)
                    .flat_map(|i| {
                        let key = (i % 2 == 0).then_some(&b"key"[..]);
                        encode_record(key, Some(&b"some value bytes"[..(i as usize * 3) % 16]), i * 7, i)
                    })
                    .collect();
                (section, n as i32)
            })
            .collect();
        let mut accepted = 0;
        for _ in 0..30_000 {
            let (section, n) = &seeds[rng.below(seeds.len())];
            let mut section = section.clone();
            let count = match rng.below(8) {
                0 => n - 1,
                1 => n + 1,
                _ => *n,
            };
            let codec = CODECS[rng.below(CODECS.len())];
            if rng.below(2) == 0 {
                mutate(&mut rng, &mut section);
            }
            let mut b = lying(&section, count, codec);
            if rng.below(4) == 0 {
                let mut packed = b[61..].to_vec();
                mutate(&mut rng, &mut packed);
                b = recompressed_section(&b, &packed, codec);
            }
            let h = BatchHeader::parse(&b).unwrap();
            if validate_produce_batch(&h, &b, &ANY_TIME, false).is_ok() {
                accepted += 1;
                let (_, records) = batch_records(&h, &b).expect("a validated batch reads back");
                let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
                assert_eq!(offsets, (0..i64::from(count)).collect::<Vec<_>>(), "{codec:?}");
            }
        }
        assert!(accepted > 5_000, "only {accepted} batches accepted; the test exercises little");
    }
}
