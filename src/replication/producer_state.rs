//! Idempotent-producer state of one partition.
//!
//! For each producer id the partition remembers the current epoch and the last
//! [`CACHED_BATCHES`] batches (sequence range and assigned offsets), as Kafka does. A retried
//! batch is recognised by its sequence range and answered with its original offsets; a
//! sequence gap is refused with OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is fenced.
//! The state is rebuilt from the log's batch headers on restart.

use std::collections::{HashMap, VecDeque};

use crate::storage::BatchHeader;

pub const CACHED_BATCHES: usize = 5;
const NO_PRODUCER_ID: i64 = -1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchRecord {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: i64,
    pub last_offset: i64,
}

#[derive(Debug, Default, Clone)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchRecord>,
    /// The max timestamp of the producer's last batch.
    last_timestamp: i64,
}

/// One producer as DescribeProducers reports it (Kafka's `ProducerStateEntry`, without
/// the transaction fields: no transactions yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub last_sequence: i32,
    pub last_timestamp: i64,
}

/// What to do with an incoming batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Not idempotent, or the next batch in sequence: append it.
    Append,
    /// A retry of a batch already in the log: answer with its original offsets.
    Duplicate(BatchRecord),
    OutOfOrder {
        expected: i32,
        got: i32,
    },
    InvalidEpoch {
        current: i16,
        got: i16,
    },
}

#[derive(Debug, Default, Clone)]
pub struct ProducerStateTable {
    producers: HashMap<i64, ProducerEntry>,
}

fn next_seq(seq: i32) -> i32 {
    if seq == i32::MAX {
        0
    } else {
        seq + 1
    }
}

impl ProducerStateTable {
    pub fn check(&self, batch: &BatchHeader) -> SequenceCheck {
        if batch.producer_id == NO_PRODUCER_ID || batch.base_sequence < 0 {
            return SequenceCheck::Append;
        }
        let Some(entry) = self.producers.get(&batch.producer_id) else {
            // Unknown producer (new, or its state was removed with old segments): accept.
            return SequenceCheck::Append;
        };
        if batch.producer_epoch < entry.epoch {
            return SequenceCheck::InvalidEpoch { current: entry.epoch, got: batch.producer_epoch };
        }
        let first = batch.base_sequence;
        let last = batch.last_sequence();
        if batch.producer_epoch > entry.epoch {
            return if first == 0 {
                SequenceCheck::Append
            } else {
                SequenceCheck::OutOfOrder { expected: 0, got: first }
            };
        }
        if let Some(dup) = entry.batches.iter().find(|b| b.first_seq == first && b.last_seq == last) {
            return SequenceCheck::Duplicate(*dup);
        }
        match entry.batches.back() {
            Some(latest) if next_seq(latest.last_seq) != first => {
                SequenceCheck::OutOfOrder { expected: next_seq(latest.last_seq), got: first }
            }
            _ => SequenceCheck::Append,
        }
    }

    /// Record a batch that was appended at `base_offset..=last_offset`.
    pub fn record(&mut self, batch: &BatchHeader, base_offset: i64, last_offset: i64) {
        if batch.producer_id == NO_PRODUCER_ID || batch.base_sequence < 0 {
            return;
        }
        let entry = self.producers.entry(batch.producer_id).or_default();
        if batch.producer_epoch != entry.epoch {
            entry.epoch = batch.producer_epoch;
            entry.batches.clear();
        }
        entry.batches.push_back(BatchRecord {
            first_seq: batch.base_sequence,
            last_seq: batch.last_sequence(),
            base_offset,
            last_offset,
        });
        entry.last_timestamp = batch.max_timestamp;
        while entry.batches.len() > CACHED_BATCHES {
            entry.batches.pop_front();
        }
    }

    /// Rebuild from the batch headers of the log, oldest first.
    pub fn rebuild<'a>(headers: impl IntoIterator<Item = &'a BatchHeader>) -> Self {
        let mut table = Self::default();
        for h in headers {
            if !h.is_control() {
                table.record(h, h.base_offset, h.last_offset());
            }
        }
        table
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Every producer with state here, by producer id.
    pub fn active_producers(&self) -> Vec<ActiveProducer> {
        let mut out: Vec<ActiveProducer> = self
            .producers
            .iter()
            .filter_map(|(id, e)| {
                e.batches.back().map(|last| ActiveProducer {
                    producer_id: *id,
                    producer_epoch: e.epoch,
                    last_sequence: last.last_seq,
                    last_timestamp: e.last_timestamp,
                })
            })
            .collect();
        out.sort_by_key(|p| p.producer_id);
        out
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(pid: i64, epoch: i16, seq: i32, count: i32) -> BatchHeader {
        BatchHeader {
            base_offset: 0,
            batch_length: 49,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: count - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            records_count: count,
        }
    }

    #[test]
    fn sequences_duplicates_gaps_and_epochs() {
        let mut t = ProducerStateTable::default();
        let b0 = header(7, 0, 0, 3);
        assert_eq!(t.check(&b0), SequenceCheck::Append);
        t.record(&b0, 10, 12);
        // retry of the same batch → its original offsets
        assert_eq!(
            t.check(&b0),
            SequenceCheck::Duplicate(BatchRecord { first_seq: 0, last_seq: 2, base_offset: 10, last_offset: 12 })
        );
        // gap
        assert_eq!(t.check(&header(7, 0, 5, 1)), SequenceCheck::OutOfOrder { expected: 3, got: 5 });
        let b1 = header(7, 0, 3, 2);
        assert_eq!(t.check(&b1), SequenceCheck::Append);
        t.record(&b1, 13, 14);
        // new epoch must start at 0
        assert_eq!(t.check(&header(7, 1, 5, 1)), SequenceCheck::OutOfOrder { expected: 0, got: 5 });
        t.record(&header(7, 1, 0, 1), 15, 15);
        assert_eq!(t.check(&header(7, 0, 5, 1)), SequenceCheck::InvalidEpoch { current: 1, got: 0 });
        // non-idempotent batches are never checked
        assert_eq!(t.check(&header(-1, -1, -1, 1)), SequenceCheck::Append);
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let mut t = ProducerStateTable::default();
        for i in 0..7 {
            let h = header(1, 0, i, 1);
            assert_eq!(t.check(&h), SequenceCheck::Append);
            t.record(&h, i as i64, i as i64);
        }
        assert!(matches!(t.check(&header(1, 0, 6, 1)), SequenceCheck::Duplicate(_)));
        assert!(matches!(t.check(&header(1, 0, 2, 1)), SequenceCheck::Duplicate(_)));
        assert!(matches!(t.check(&header(1, 0, 1, 1)), SequenceCheck::OutOfOrder { .. }));
    }

    #[test]
    fn rebuild_from_headers() {
        let mut h = header(3, 2, 0, 4);
        h.base_offset = 100;
        let t = ProducerStateTable::rebuild([&h]);
        assert!(matches!(t.check(&h), SequenceCheck::Duplicate(BatchRecord { base_offset: 100, .. })));
        assert_eq!(t.check(&header(3, 2, 4, 1)), SequenceCheck::Append);
    }

    #[test]
    fn active_producers_report_epoch_last_sequence_and_timestamp() {
        let mut t = ProducerStateTable::default();
        let mut a = header(9, 0, 0, 3);
        a.max_timestamp = 1_000;
        t.record(&a, 0, 2);
        let mut b = header(4, 1, 0, 1);
        b.max_timestamp = 2_000;
        t.record(&b, 3, 3);
        let mut a2 = header(9, 0, 3, 2);
        a2.max_timestamp = 3_000;
        t.record(&a2, 4, 5);
        t.record(&header(-1, -1, -1, 5), 6, 10);
        let got = t.active_producers();
        assert_eq!(
            got,
            [
                ActiveProducer { producer_id: 4, producer_epoch: 1, last_sequence: 0, last_timestamp: 2_000 },
                ActiveProducer { producer_id: 9, producer_epoch: 0, last_sequence: 4, last_timestamp: 3_000 },
            ]
        );
    }
}
