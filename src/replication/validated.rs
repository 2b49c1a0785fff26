//! Produce validation, before a partition is locked: the framing and CRC of every batch,
//! then what is inside (records, counts, offsets, timestamps, keys). An append takes only
//! [`ValidatedRecords`], so no path can store a batch that skipped the checks.

use bytes::BytesMut;

use crate::storage::{needs_decompression, split_batches, validate_batches, validate_produce_batch, BatchHeader};
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

/// One partition's records from a Produce request, checked batch by batch.
pub struct ValidatedRecords {
    bytes: BytesMut,
    headers: Vec<BatchHeader>,
}

impl ValidatedRecords {
    /// All batches pass or the records are refused whole.
    pub fn validate(bytes: BytesMut, limits: &ProduceLimits) -> Result<ValidatedRecords, BatchError> {
        let headers = validate_batches(&bytes, limits.max_message_bytes)?;
        if let Some(bounds) = &limits.timestamps {
            let mut pos = 0;
            for h in &headers {
                let len = h.total_len();
                validate_produce_batch(h, &bytes[pos..pos + len], bounds, limits.require_keys)?;
                pos += len;
            }
        }
        Ok(ValidatedRecords { bytes, headers })
    }

    /// Would validating `bytes` under `limits` decompress anything? Such work belongs on
    /// the blocking pool. Looks at batch headers only.
    pub fn needs_decompression(bytes: &[u8], limits: &ProduceLimits) -> bool {
        limits.timestamps.is_some() && split_batches(bytes).is_ok_and(|hs| hs.iter().any(needs_decompression))
    }

    /// The batch headers, and the batches' bytes for stamping offsets, epochs and append
    /// times in place.
    pub fn parts_mut(&mut self) -> (&[BatchHeader], &mut [u8]) {
        (&self.headers, &mut self.bytes)
    }
}
