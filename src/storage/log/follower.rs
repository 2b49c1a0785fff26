//! Appends on a follower: batches copied from the leader keep the offsets and partition
//! leader epochs the leader gave them (Kafka's `UnifiedLog.appendAsFollower`).

use super::{AppendInfo, PartitionLog};
use crate::storage::batch::{check_batch, split_batches};
use crate::storage::error::StorageError;

impl PartitionLog {
    /// Appends batches fetched from the leader as they are: offsets are never reassigned.
    /// Each batch's framing and CRC are checked; offsets must increase from batch to
    /// batch and the first must be at or above the log end offset (a compacted leader
    /// log may leave gaps between batches, so gaps are allowed, overlaps are not). The
    /// leader epoch cache learns every epoch newer than its latest from the batches'
    /// partition leader epochs. All or nothing.
    pub fn append_as_follower(&mut self, records: &[u8], now_ms: i64) -> Result<AppendInfo, StorageError> {
        let headers = split_batches(records)?;
        let log_end_offset = self.log_end_offset();
        let mut expected_at_least = log_end_offset;
        let mut pos = 0;
        let mut record_count: i64 = 0;
        for h in &headers {
            check_batch(h, &records[pos..pos + h.total_len()])?;
            if h.base_offset < expected_at_least {
                return Err(StorageError::UnexpectedAppendOffset {
                    base_offset: h.base_offset,
                    expected_at_least,
                    log_end_offset,
                });
            }
            expected_at_least = h.next_offset();
            pos += h.total_len();
            record_count += i64::from(h.records_count.max(0));
        }
        let base_offset = headers[0].base_offset;
        let last_offset = expected_at_least - 1;
        if self.should_roll(records.len() as u64, last_offset, now_ms) {
            self.roll(now_ms)?;
        }
        if let Err(e) = self.active_mut().append(records, &headers, now_ms) {
            self.truncations += 1;
            return Err(e.into());
        }
        for h in &headers {
            let epoch = h.partition_leader_epoch;
            if epoch >= 0 && self.epochs.latest_epoch().is_none_or(|e| epoch > e) {
                if let Err(e) = self.epochs.assign(epoch, h.base_offset) {
                    self.truncations += 1;
                    // Keep the append all-or-nothing: the epochs must be known for the data.
                    self.active_mut().truncate_to(base_offset)?;
                    self.epochs.truncate_from_end(log_end_offset)?;
                    return Err(e.into());
                }
            }
        }
        self.finish_append(records, &headers, base_offset, last_offset, record_count, now_ms)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::storage::batch::validate_batches;
    use crate::storage::test_util::build_batch;
    use crate::storage::LogConfig;

    fn config() -> LogConfig {
        LogConfig { segment_bytes: 1000, index_interval_bytes: 200, retention_ms: -1, ..LogConfig::default() }
    }

    /// A leader log with 3-record batches in epochs 0 (0..30), 1 (30..60) and 3 (60..90).
    fn leader(dir: &Path) -> PartitionLog {
        let mut log = PartitionLog::open(dir, config(), 0).unwrap();
        for i in 0..30 {
            let mut batch = build_batch(0, &[1, 2, 3], 50);
            log.append(&mut batch, [0, 1, 3][i / 10], 1_000).unwrap();
        }
        log
    }

    fn all(log: &PartitionLog) -> Vec<u8> {
        log.read(log.log_start_offset(), usize::MAX, i64::MAX).unwrap().to_vec()
    }

    fn epochs(log: &PartitionLog) -> Vec<(i32, i64)> {
        log.epochs.entries().to_vec()
    }

    #[test]
    fn follower_append_keeps_the_leader_offsets_and_learns_its_epochs() {
        let dir = tempfile::tempdir().unwrap();
        let leader = leader(&dir.path().join("leader"));
        let mut follower = PartitionLog::open(&dir.path().join("follower"), config(), 0).unwrap();
        // Fetched in two pieces, as a fetcher with a small max_bytes would.
        let first = leader.read(0, 2_000, i64::MAX).unwrap();
        let info = follower.append_as_follower(&first, 1_000).unwrap();
        assert_eq!(info.base_offset, 0);
        let rest = leader.read(follower.log_end_offset(), usize::MAX, i64::MAX).unwrap();
        follower.append_as_follower(&rest, 1_000).unwrap();
        assert_eq!(follower.log_end_offset(), 90);
        assert_eq!(all(&follower), all(&leader), "byte-identical, same offsets");
        assert_eq!(epochs(&follower), vec![(0, 0), (1, 30), (3, 60)]);
        assert_eq!(follower.end_offset_for_epoch(2), Some((1, 60)));
        assert!(follower.segment_count() > 1, "rolled like any log");

        // A crash (no close) and a reopen read everything back.
        drop(follower);
        let follower = PartitionLog::open(&dir.path().join("follower"), config(), 2_000).unwrap();
        assert_eq!(all(&follower), all(&leader));
        assert_eq!(epochs(&follower), vec![(0, 0), (1, 30), (3, 60)]);
    }

    #[test]
    fn follower_append_refuses_overlaps_and_corrupt_batches_whole() {
        let dir = tempfile::tempdir().unwrap();
        let leader = leader(&dir.path().join("leader"));
        let mut follower = PartitionLog::open(&dir.path().join("follower"), config(), 0).unwrap();
        follower.append_as_follower(&leader.read(0, 1, i64::MAX).unwrap(), 1_000).unwrap();
        assert_eq!(follower.log_end_offset(), 3);

        // Below the log end offset: refused, nothing appended.
        let again = leader.read(0, 1_000, i64::MAX).unwrap();
        let err = follower.append_as_follower(&again, 1_000).unwrap_err();
        assert!(matches!(err, StorageError::UnexpectedAppendOffset { base_offset: 0, .. }), "{err}");
        // Batches out of order: refused as a whole, even though the first one fits.
        let mut swapped = leader.read(6, 1, i64::MAX).unwrap().to_vec();
        swapped.extend_from_slice(&leader.read(3, 1, i64::MAX).unwrap());
        assert!(follower.append_as_follower(&swapped, 1_000).is_err());
        // A flipped byte in the records: the CRC catches it.
        let mut corrupt = leader.read(3, 1, i64::MAX).unwrap().to_vec();
        *corrupt.last_mut().unwrap() ^= 1;
        assert!(matches!(follower.append_as_follower(&corrupt, 1_000), Err(StorageError::Batch(_))));
        assert_eq!(follower.log_end_offset(), 3);

        // A gap (a compacted leader's log) is taken as given.
        let gap = leader.read(9, 1, i64::MAX).unwrap();
        follower.append_as_follower(&gap, 1_000).unwrap();
        assert_eq!(follower.log_end_offset(), 12);
        let bytes = all(&follower);
        let offsets: Vec<i64> = validate_batches(&bytes, usize::MAX).unwrap().iter().map(|h| h.base_offset).collect();
        assert_eq!(offsets, vec![0, 9]);
    }

    #[test]
    fn a_divergent_follower_truncates_takes_the_leader_tail_and_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let leader_dir = dir.path().join("leader");
        let follower_dir = dir.path().join("follower");
        let mut leader = leader(&leader_dir);
        let mut follower = PartitionLog::open(&follower_dir, config(), 0).unwrap();
        follower.append_as_follower(&leader.read(0, usize::MAX, 60).unwrap(), 1_000).unwrap();
        // The follower then led epoch 2 for a while and wrote records nobody else got.
        for _ in 0..5 {
            follower.append(&mut build_batch(0, &[9, 9], 40), 2, 1_000).unwrap();
        }
        assert_eq!(follower.log_end_offset(), 70);
        follower.flush().unwrap();

        // The leader's epoch 1 ends at 60: everything from there goes (KIP-101).
        let (epoch, end) = leader.end_offset_for_epoch(2).unwrap();
        assert_eq!((epoch, end), (1, 60));
        follower.truncate_to(end).unwrap();
        assert_eq!(follower.log_end_offset(), 60);
        assert_eq!(follower.recovery_point(), 60);
        assert_eq!(epochs(&follower), vec![(0, 0), (1, 30)]);
        follower.append_as_follower(&leader.read(60, usize::MAX, i64::MAX).unwrap(), 1_000).unwrap();
        assert_eq!(all(&follower), all(&leader));
        drop(follower);
        let follower = PartitionLog::open(&follower_dir, config(), 2_000).unwrap();
        assert_eq!(all(&follower), all(&leader));
        assert_eq!(epochs(&follower), vec![(0, 0), (1, 30), (3, 60)]);
        drop(follower);

        // The leader's retention moved past the follower: start over at its log start.
        leader.delete_records_before(75).unwrap();
        let mut follower = PartitionLog::open(&follower_dir, config(), 2_000).unwrap();
        follower.truncate_fully_and_start_at(75).unwrap();
        assert_eq!((follower.log_start_offset(), follower.log_end_offset(), follower.segment_count()), (75, 75, 1));
        assert_eq!(epochs(&follower), vec![]);
        follower.append_as_follower(&leader.read(75, usize::MAX, i64::MAX).unwrap(), 1_000).unwrap();
        drop(follower);
        let follower = PartitionLog::open(&follower_dir, config(), 2_000).unwrap();
        assert_eq!((follower.log_start_offset(), follower.log_end_offset()), (75, 90));
        assert_eq!(all(&follower), all(&leader));
        assert_eq!(epochs(&follower), vec![(3, 75)]);
    }
}
