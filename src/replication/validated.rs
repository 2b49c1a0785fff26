//! Produce validation, before a partition is locked: the framing and CRC of every batch,
//! then what is inside (records, counts, offsets, timestamps, keys). An append takes only
//! [`ValidatedRecords`], so no path can store a batch that skipped the checks.

use bytes::BytesMut;

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

    /// Checks what is inside every batch: all pass or the records are refused whole.
    pub fn validate(self, limits: &ProduceLimits) -> Result<ValidatedRecords, BatchError> {
        if let Some(bounds) = &limits.timestamps {
            let mut pos = 0;
            for h in &self.headers {
                let len = h.total_len();
                validate_produce_batch(h, &self.bytes[pos..pos + len], bounds, limits.require_keys)?;
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
