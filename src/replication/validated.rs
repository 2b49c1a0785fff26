//! Produce validation, before a partition is locked: the framing and CRC of every batch,
//! then what is inside (records, counts, offsets, timestamps, keys). An append takes only
//! [`ValidatedRecords`], so no path can store a batch that skipped the checks.

use bytes::BytesMut;

use crate::storage::batch::set_max_timestamp;
use crate::storage::{needs_decompression, validate_batches, validate_produce_batch, BatchHeader};
use crate::storage::{BatchError, TimestampBounds};

/// What a Produce must satisfy beyond a well-formed batch: the topic's max.message.bytes
/// and, for client batches, record contents and timestamp bounds.
#[derive(Debug, Clone, Copy)]
pub struct ProduceLimits {
    pub max_message_bytes: usize,
    /// `None` for the broker's own writes (`__consumer_offsets`), which are trusted.
    pub timestamps: Option<TimestampBounds>,
    /// Compacted topics: records without a key are refused.
    pub require_keys: bool,
}

/// One partition's records from a Produce request whose batch framing, sizes and CRCs
/// are checked; what is inside the batches is not yet.
pub struct FramedRecords {
    bytes: BytesMut,
    headers: Vec<BatchHeader>,
}

impl FramedRecords {
    pub fn check(bytes: BytesMut, limits: &ProduceLimits) -> Result<FramedRecords, BatchError> {
        let headers = validate_batches(&bytes, limits.max_message_bytes)?;
        Ok(FramedRecords { bytes, headers })
    }

    /// Would validating the contents under `limits` decompress anything? Such work
    /// belongs on the blocking pool.
    pub fn needs_decompression(&self, limits: &ProduceLimits) -> bool {
        limits.timestamps.is_some() && self.headers.iter().any(needs_decompression)
    }

    /// Checks what is inside every batch: all pass or the records are refused whole. A
    /// CreateTime batch whose header misstates its max timestamp is corrected (as Kafka's
    /// validator sets it from the records), CRC included.
    pub fn validate(mut self, limits: &ProduceLimits) -> Result<ValidatedRecords, BatchError> {
        if let Some(bounds) = &limits.timestamps {
            let mut pos = 0;
            for h in &mut self.headers {
                let len = h.total_len();
                let batch = &mut self.bytes[pos..pos + len];
                let max_timestamp = validate_produce_batch(h, batch, bounds, limits.require_keys)?;
                if !h.uses_log_append_time() && h.max_timestamp != max_timestamp {
                    set_max_timestamp(batch, max_timestamp);
                    h.max_timestamp = max_timestamp;
                }
                pos += len;
            }
        }
        Ok(ValidatedRecords { bytes: self.bytes, headers: self.headers })
    }
}

/// One partition's records from a Produce request, checked batch by batch.
pub struct ValidatedRecords {
    bytes: BytesMut,
    headers: Vec<BatchHeader>,
}

impl ValidatedRecords {
    /// Framing and contents in one step (see [`FramedRecords`]).
    pub fn validate(bytes: BytesMut, limits: &ProduceLimits) -> Result<ValidatedRecords, BatchError> {
        FramedRecords::check(bytes, limits)?.validate(limits)
    }

    /// The batch headers, and the batches' bytes for stamping offsets, epochs and append
    /// times in place.
    pub fn parts_mut(&mut self) -> (&[BatchHeader], &mut [u8]) {
        (&self.headers, &mut self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::batch::Compression;
    use crate::storage::test_util::{compressed_with, encode_record, raw_batch, RawHeader};

    /// A header that misstates the max timestamp (too low, too high, in any codec) is
    /// corrected from the records with a CRC that still checks; an honest one is stored
    /// byte for byte as sent.
    #[test]
    fn a_misstated_max_timestamp_is_corrected() {
        let section: Vec<u8> =
            (0..).zip([0i64, 200, 100]).flat_map(|(i, d)| encode_record(Some(b"k"), Some(b"v"), d, i)).collect();
        let bounds = TimestampBounds { now_ms: 1_000, before_max_ms: i64::MAX, after_max_ms: i64::MAX };
        let limits = ProduceLimits { max_message_bytes: 1 << 20, timestamps: Some(bounds), require_keys: false };
        for codec in [Compression::None, Compression::Gzip, Compression::Zstd] {
            for claimed in [1_000, 1_200, 999_999_999] {
                let h = RawHeader {
                    base_offset: 0,
                    codec: 0,
                    last_offset_delta: 2,
                    base_ts: 1_000,
                    max_ts: claimed,
                    producer_id: -1,
                    records_count: 3,
                };
                let sent = compressed_with(&raw_batch(h, &section), codec);
                let mut v = ValidatedRecords::validate(BytesMut::from(&sent[..]), &limits).unwrap();
                let (headers, bytes) = v.parts_mut();
                assert_eq!(headers[0].max_timestamp, 1_200, "{codec:?} claimed {claimed}");
                let stored = validate_batches(bytes, usize::MAX).expect("the corrected CRC checks");
                assert_eq!(stored[0].max_timestamp, 1_200);
                if claimed == 1_200 {
                    assert_eq!(&bytes[..], &sent[..]);
                }
            }
        }
    }
}
