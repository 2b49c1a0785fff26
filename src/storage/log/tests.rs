//! PartitionLog behaviour: appends, reads, recovery, retention, lookups.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::*;
use crate::storage::batch::{split_batches, validate_batches};
use crate::storage::segment::{segment_file_name, INDEX_SUFFIX, LOG_SUFFIX};
use crate::storage::test_util::{build_batch, gzipped, mark_compressed};

fn config(segment_bytes: u64) -> LogConfig {
    LogConfig { segment_bytes, index_interval_bytes: 200, retention_ms: -1, ..LogConfig::default() }
}

/// Appends one batch of `timestamps.len()` records with 50-byte values.
fn append(log: &mut PartitionLog, timestamps: &[i64], epoch: i32) -> AppendInfo {
    let mut batch = build_batch(0, timestamps, 50);
    log.append(&mut batch, epoch, 1_000).unwrap()
}

/// Appends `n` batches of 3 records each.
fn fill(log: &mut PartitionLog, n: usize) {
    for i in 0..n {
        let ts = 10_000 + 10 * i as i64;
        append(log, &[ts, ts + 1, ts + 2], 0);
    }
}

/// `(base offset, last offset)` of each batch in a read result, checking every CRC.
fn batches(bytes: &[u8]) -> Vec<(i64, i64)> {
    if bytes.is_empty() {
        return Vec::new();
    }
    validate_batches(bytes, usize::MAX).unwrap().iter().map(|h| (h.base_offset, h.last_offset())).collect()
}

fn active_log_path(log: &PartitionLog) -> std::path::PathBuf {
    log.dir().join(segment_file_name(log.active().base_offset(), LOG_SUFFIX))
}

fn reopen(dir: &Path, cfg: LogConfig) -> PartitionLog {
    PartitionLog::open(dir, cfg, 2_000).unwrap()
}

#[test]
fn append_and_read_across_segment_rolls() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(&dir.path().join("t-0"), config(1000), 0).unwrap();
    for i in 0..30 {
        let info = append(&mut log, &[1, 2, 3], 0);
        assert_eq!((info.base_offset, info.last_offset), (3 * i, 3 * i + 2));
    }
    assert_eq!(log.log_end_offset(), 90);
    assert!(log.segment_count() >= 5, "{} segments", log.segment_count());
    let all = log.read(0, usize::MAX, i64::MAX).unwrap();
    let expected: Vec<(i64, i64)> = (0..30).map(|i| (3 * i, 3 * i + 2)).collect();
    assert_eq!(batches(&all), expected);
    assert_eq!(all.len() as u64, log.size_bytes());
    for offset in 0..90 {
        let got = batches(&log.read(offset, 1, i64::MAX).unwrap());
        let base = offset - offset % 3;
        assert_eq!(got, vec![(base, base + 2)], "read at {offset}");
    }
    // Spanning a segment boundary.
    let second = log.segments[1].base_offset();
    let got = batches(&log.read(second - 1, 10_000, i64::MAX).unwrap());
    assert_eq!(got.first(), Some(&(second - 3, second - 1)));
    assert!(got.len() > 1);
}

#[test]
fn read_respects_max_bytes_and_max_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1 << 20), 0).unwrap();
    fill(&mut log, 10);
    let batch_len = log.read(0, 1, i64::MAX).unwrap().len();
    assert!(batch_len > 100);
    assert_eq!(batches(&log.read(3, 10, i64::MAX).unwrap()), vec![(3, 5)]);
    assert_eq!(batches(&log.read(3, 2 * batch_len, i64::MAX).unwrap()), vec![(3, 5), (6, 8)]);
    assert_eq!(batches(&log.read(3, 2 * batch_len - 1, i64::MAX).unwrap()), vec![(3, 5)]);
    assert_eq!(batches(&log.read(0, usize::MAX, 9).unwrap()), vec![(0, 2), (3, 5), (6, 8)]);
    assert!(log.read(9, usize::MAX, 9).unwrap().is_empty());
    assert!(log.read(30, usize::MAX, i64::MAX).unwrap().is_empty());
}

/// The read plan (index lookups by position, header scans, segment boundaries) against
/// the rule it implements, computed from the list of all batches: from the batch holding
/// `offset`, consecutive batches below `max_offset` while they fit `max_bytes`, the first
/// one always; nothing from `max_offset` on.
#[test]
fn read_plan_matches_the_whole_batch_rule_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1000), 0).unwrap();
    for i in 0..24 {
        // Batches of 1 to 4 records, so sizes vary and index entries fall unevenly.
        let n = 1 + i % 4;
        let ts: Vec<i64> = (0..n).map(|k| 10_000 + 10 * i + k).collect();
        append(&mut log, &ts, 0);
    }
    assert!(log.segment_count() >= 4);
    let all = log.read(0, usize::MAX, i64::MAX).unwrap();
    let headers = validate_batches(&all, usize::MAX).unwrap();
    let leo = log.log_end_offset();
    for offset in 0..leo {
        for max_offset in [leo, leo - 1, offset + 3, offset + 1] {
            for max_bytes in [1, 150, 400, 777, 1500, 5000, usize::MAX] {
                let first = headers.iter().position(|h| h.last_offset() >= offset).unwrap();
                let mut expected = Vec::new();
                let mut taken = 0usize;
                for h in &headers[first..] {
                    if offset >= max_offset
                        || h.base_offset >= max_offset
                        || (!expected.is_empty() && taken + h.total_len() > max_bytes)
                    {
                        break;
                    }
                    taken += h.total_len();
                    expected.push((h.base_offset, h.last_offset()));
                }
                let slices = log.read_slices(offset, max_bytes, max_offset).unwrap();
                assert_eq!(slices.len(), taken, "offset {offset} max_offset {max_offset} max_bytes {max_bytes}");
                let got = batches(&slices.read().unwrap());
                assert_eq!(got, expected, "offset {offset} max_offset {max_offset} max_bytes {max_bytes}");
            }
        }
    }
}

#[test]
fn offset_out_of_range_on_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1 << 20), 0).unwrap();
    fill(&mut log, 4);
    log.delete_records_before(6).unwrap();
    for offset in [5, 13] {
        match log.read(offset, 100, i64::MAX) {
            Err(StorageError::OffsetOutOfRange { offset: o, log_start_offset: 6, log_end_offset: 12 }) => {
                assert_eq!(o, offset)
            }
            other => panic!("read at {offset}: {other:?}"),
        }
    }
    assert_eq!(batches(&log.read(6, 1, i64::MAX).unwrap()), vec![(6, 8)]);
}

#[test]
fn reopen_after_clean_close() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1000), 0).unwrap();
    fill(&mut log, 12);
    let before = log.read(0, usize::MAX, i64::MAX).unwrap();
    let segments = log.segment_count();
    log.close().unwrap();
    assert!(dir.path().join(CLEAN_SHUTDOWN_MARKER).exists());

    let mut log = reopen(dir.path(), config(1000));
    assert!(!dir.path().join(CLEAN_SHUTDOWN_MARKER).exists());
    assert_eq!((log.log_end_offset(), log.segment_count()), (36, segments));
    assert_eq!(log.read(0, usize::MAX, i64::MAX).unwrap(), before);
    assert_eq!(append(&mut log, &[5], 0).base_offset, 36);
}

#[test]
fn recovery_truncates_garbage_after_last_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1 << 20), 0).unwrap();
    fill(&mut log, 5);
    let path = active_log_path(&log);
    drop(log); // no clean shutdown
    OpenOptions::new().append(true).open(&path).unwrap().write_all(&[0xab; 100]).unwrap();

    let mut log = reopen(dir.path(), config(1 << 20));
    assert_eq!(log.log_end_offset(), 15);
    assert_eq!(batches(&log.read(0, usize::MAX, i64::MAX).unwrap()).len(), 5);
    assert_eq!(append(&mut log, &[1, 2], 0).base_offset, 15);
    assert_eq!(batches(&log.read(15, 1, i64::MAX).unwrap()), vec![(15, 16)]);
}

#[test]
fn recovery_truncates_torn_half_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1 << 20), 0).unwrap();
    fill(&mut log, 5);
    log.flush().unwrap(); // recovery point = 15; the tail after it is still scanned
    let path = active_log_path(&log);
    drop(log);
    let mut torn = build_batch(15, &[1, 2, 3], 50);
    torn.truncate(torn.len() / 2);
    OpenOptions::new().append(true).open(&path).unwrap().write_all(&torn).unwrap();

    let mut log = reopen(dir.path(), config(1 << 20));
    assert_eq!(log.log_end_offset(), 15);
    assert_eq!(append(&mut log, &[1], 0).base_offset, 15);
}

#[test]
fn recovery_truncates_batch_with_flipped_byte() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1 << 20), 0).unwrap();
    fill(&mut log, 5);
    let path = active_log_path(&log);
    let size = log.size_bytes();
    drop(log);
    let file = OpenOptions::new().read(true).write(true).open(&path).unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, size - 10).unwrap();
    file.write_all_at(&[byte[0] ^ 0x01], size - 10).unwrap();

    let mut log = reopen(dir.path(), config(1 << 20));
    assert_eq!(log.log_end_offset(), 12);
    assert_eq!(append(&mut log, &[1], 0).base_offset, 12);
}

#[test]
fn recovery_drops_segments_after_a_corrupt_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1000), 0).unwrap();
    fill(&mut log, 20);
    assert!(log.segment_count() >= 3);
    let first_log = dir.path().join(segment_file_name(0, LOG_SUFFIX));
    let (pos, _) = log.segments[0].find_batch(3).unwrap().unwrap();
    drop(log); // recovery point 0: every segment is scanned
    let file = OpenOptions::new().write(true).open(&first_log).unwrap();
    file.write_all_at(&[0xff; 4], pos + 30).unwrap();

    let log = reopen(dir.path(), config(1000));
    assert_eq!((log.log_end_offset(), log.segment_count()), (3, 1));
    let files = fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(files, 3 + 2, "one segment's three files plus two checkpoints");
}

#[test]
fn missing_or_corrupt_index_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1 << 20), 0).unwrap();
    fill(&mut log, 40);
    let entries = log.active().offset_index().len();
    assert!(entries > 5);
    log.close().unwrap();
    let index = dir.path().join(segment_file_name(0, INDEX_SUFFIX));

    fs::remove_file(&index).unwrap();
    let log = reopen(dir.path(), config(1 << 20));
    assert_eq!(log.active().offset_index().len(), entries);
    assert_eq!(fs::metadata(&index).unwrap().len(), 8 * entries as u64);
    for offset in [0, 50, 119] {
        let base = offset - offset % 3;
        assert_eq!(batches(&log.read(offset, 1, i64::MAX).unwrap()), vec![(base, base + 2)]);
    }
    log.close().unwrap();

    OpenOptions::new().append(true).open(&index).unwrap().write_all(&[1, 2, 3]).unwrap();
    let log = reopen(dir.path(), config(1 << 20));
    assert_eq!(log.active().offset_index().len(), entries);
    assert_eq!(batches(&log.read(100, 1, i64::MAX).unwrap()), vec![(99, 101)]);
}

#[test]
fn retention_by_size_deletes_only_sealed_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1000), 0).unwrap();
    fill(&mut log, 30);
    let segments = log.segment_count();
    let sizes: Vec<u64> = log.segments.iter().map(LogSegment::size).collect();
    // Keep at least the last three segments' worth of bytes.
    let keep: u64 = sizes[segments - 3..].iter().sum();
    log.set_config(LogConfig { retention_bytes: keep as i64, ..config(1000) });
    assert_eq!(log.enforce_retention(0).unwrap(), segments - 3);
    assert_eq!(log.segment_count(), 3);
    assert_eq!(log.log_start_offset(), log.segments[0].base_offset());
    assert!(log.read(0, 1, i64::MAX).is_err());

    log.set_config(LogConfig { retention_bytes: 0, ..config(1000) });
    assert_eq!(log.enforce_retention(0).unwrap(), 2);
    assert_eq!(log.segment_count(), 1, "the active segment stays");
    assert_eq!(log.log_start_offset(), log.active().base_offset());
    assert_eq!(log.enforce_retention(0).unwrap(), 0);
}

#[test]
fn retention_by_time_deletes_old_sealed_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1000), 0).unwrap();
    for i in 0..30 {
        let ts = 1_000_000 + 1000 * i;
        append(&mut log, &[ts, ts, ts], 0);
    }
    let cutoff_segment = 2;
    let newest_kept = log.segments[cutoff_segment].max_timestamp().unwrap().0;
    let oldest_deleted = log.segments[cutoff_segment - 1].max_timestamp().unwrap().0;
    log.set_config(LogConfig { retention_ms: 100, ..config(1000) });
    // Segments 0 and 1 are older than the retention; segment 2 is not.
    let now = oldest_deleted + 101;
    assert!(now - newest_kept <= 100);
    assert_eq!(log.enforce_retention(now).unwrap(), 2);
    assert_eq!(log.log_start_offset(), log.segments[0].base_offset());
    // Far in the future everything is old, but the active segment stays.
    assert!(log.enforce_retention(i64::MAX / 2).unwrap() > 0);
    assert_eq!(log.segment_count(), 1);
    let log_start = log.log_start_offset();
    drop(log);
    assert_eq!(reopen(dir.path(), config(1000)).log_start_offset(), log_start);
}

#[test]
fn delete_records_before_persists() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1000), 0).unwrap();
    fill(&mut log, 30);
    let second_base = log.segments[1].base_offset();
    let target = second_base + 4;
    assert_eq!(log.delete_records_before(target).unwrap(), target);
    assert_eq!(log.segments[0].base_offset(), second_base, "first segment deleted");
    assert_eq!(log.delete_records_before(2).unwrap(), target, "never moves back");
    assert!(matches!(log.delete_records_before(91), Err(StorageError::OffsetOutOfRange { .. })));
    // Reading inside the batch that straddles the start offset is allowed.
    assert!(!log.read(target, 1, i64::MAX).unwrap().is_empty());
    drop(log);

    let log = reopen(dir.path(), config(1000));
    assert_eq!(log.log_start_offset(), target);
    assert!(log.read(target - 1, 1, i64::MAX).is_err());
}

#[test]
fn offset_for_timestamp_and_max_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1 << 20), 0).unwrap();
    append(&mut log, &[100, 200, 300], 0); // 0..=2
    let info = append(&mut log, &[250, 400, 350], 0); // 3..=5
    assert_eq!((info.max_timestamp, info.offset_of_max_timestamp), (400, 4));
    assert_eq!(log.max_timestamp(), Some((400, 4)));
    assert_eq!(log.offset_for_timestamp(0).unwrap(), Some((0, 100)));
    assert_eq!(log.offset_for_timestamp(150).unwrap(), Some((1, 200)));
    assert_eq!(log.offset_for_timestamp(260).unwrap(), Some((2, 300)));
    assert_eq!(log.offset_for_timestamp(310).unwrap(), Some((4, 400)));

    // Marked compressed but not really: unreadable, so answered at batch granularity.
    let mut compressed = build_batch(0, &[500, 600], 50);
    mark_compressed(&mut compressed);
    log.append(&mut compressed, 0, 0).unwrap(); // 6..=7
    assert_eq!(log.offset_for_timestamp(450).unwrap(), Some((6, 600)));
    assert_eq!(log.offset_for_timestamp(601).unwrap(), None);
    assert_eq!(log.max_timestamp(), Some((600, 6)));
    // Really gzip-compressed: decompressed, so exact per record, as Kafka answers.
    log.append(&mut gzipped(&build_batch(0, &[700, 900, 800], 50)), 0, 0).unwrap(); // 8..=10
    assert_eq!(log.offset_for_timestamp(750).unwrap(), Some((9, 900)));
    assert_eq!(log.offset_for_timestamp(650).unwrap(), Some((8, 700)));
    assert_eq!(log.max_timestamp(), Some((900, 9)));

    log.delete_records_before(2).unwrap();
    assert_eq!(log.offset_for_timestamp(0).unwrap(), Some((2, 300)));
}

#[test]
fn offset_for_timestamp_uses_time_index_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(2000), 0).unwrap();
    for i in 0..100 {
        let ts = 1000 * i;
        append(&mut log, &[ts, ts + 10, ts + 20], 0);
    }
    log.close().unwrap();
    let log = reopen(dir.path(), config(2000));
    assert!(log.segment_count() > 5);
    for i in [0, 1, 37, 99] {
        assert_eq!(log.offset_for_timestamp(1000 * i + 5).unwrap(), Some((3 * i + 1, 1000 * i + 10)));
        assert_eq!(log.offset_for_timestamp(1000 * i).unwrap(), Some((3 * i, 1000 * i)));
    }
    assert_eq!(log.max_timestamp(), Some((99_020, 299)));
}

#[test]
fn leader_epochs_are_stamped_and_persist() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1000), 0).unwrap();
    assert_eq!(log.latest_epoch(), None);
    append(&mut log, &[1, 2, 3], 1); // 0..=2
    append(&mut log, &[1, 2, 3], 1); // 3..=5
    append(&mut log, &[1, 2, 3], 3); // 6..=8
    append(&mut log, &[1, 2], 5); // 9..=10
    let h = split_batches(&log.read(6, 1, i64::MAX).unwrap()).unwrap()[0];
    assert_eq!(h.partition_leader_epoch, 3);
    let check = |log: &PartitionLog| {
        assert_eq!(log.latest_epoch(), Some(5));
        assert_eq!(log.end_offset_for_epoch(1), Some((1, 6)));
        assert_eq!(log.end_offset_for_epoch(2), Some((1, 6)));
        assert_eq!(log.end_offset_for_epoch(3), Some((3, 9)));
        assert_eq!(log.end_offset_for_epoch(4), Some((3, 9)));
        assert_eq!(log.end_offset_for_epoch(5), Some((5, 11)));
        assert_eq!(log.end_offset_for_epoch(6), None);
    };
    check(&log);
    log.close().unwrap();
    let log = reopen(dir.path(), config(1000));
    check(&log);
}

#[test]
fn truncate_to_removes_tail_segments_and_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1000), 0).unwrap();
    for i in 0..30 {
        append(&mut log, &[1, 2, 3], i / 10); // epoch 0: 0..30, 1: 30..60, 2: 60..90
    }
    let segments = log.segment_count();
    log.truncate_to(40).unwrap(); // inside batch 39..=41: the whole batch goes
    assert_eq!(log.log_end_offset(), 39);
    assert!(log.segment_count() < segments);
    assert_eq!(log.latest_epoch(), Some(1));
    assert_eq!(log.end_offset_for_epoch(1), Some((1, 39)));
    assert_eq!(log.end_offset_for_epoch(2), None);
    assert_eq!(append(&mut log, &[7], 4).base_offset, 39);
    assert_eq!(log.end_offset_for_epoch(1), Some((1, 39)));
    assert_eq!(batches(&log.read(30, usize::MAX, i64::MAX).unwrap()).last(), Some(&(39, 39)));
    drop(log);

    let mut log = reopen(dir.path(), config(1000));
    assert_eq!(log.log_end_offset(), 40);
    log.truncate_to(0).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset(), log.segment_count()), (0, 0, 1));
    assert_eq!(log.latest_epoch(), None);
    assert_eq!(append(&mut log, &[1], 0).base_offset, 0);
}

#[test]
fn flush_policy_and_group_commit_handle() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig { flush_messages: 5, ..config(1 << 20) };
    let mut log = PartitionLog::open(dir.path(), cfg, 0).unwrap();
    assert!(log.unflushed_handle().unwrap().is_none());
    append(&mut log, &[1, 2, 3], 0);
    let (file, offset) = log.unflushed_handle().unwrap().unwrap();
    assert_eq!(offset, 3);
    file.sync_data().unwrap();
    log.mark_flushed(offset);
    assert!(log.unflushed_handle().unwrap().is_none());
    append(&mut log, &[1, 2, 3], 0);
    append(&mut log, &[1, 2, 3], 0); // 6 unflushed records ≥ 5: flushed by policy
    assert_eq!(log.recovery_point(), 9);
    assert!(log.unflushed_handle().unwrap().is_none());
    assert_eq!(CheckpointFile::read_offset(&dir.path().join(RECOVERY_POINT_CHECKPOINT)).unwrap(), Some(9));

    log.set_config(LogConfig { flush_ms: 100, ..config(1 << 20) });
    // The last flush happened at 1_000 (the helper's clock).
    log.append(&mut build_batch(0, &[1], 10), 0, 1_050).unwrap();
    assert_eq!(log.recovery_point(), 9);
    log.append(&mut build_batch(0, &[1], 10), 0, 1_100).unwrap();
    assert_eq!(log.recovery_point(), 11);
}

#[test]
fn rolls_on_segment_ms_and_oversized_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), LogConfig { segment_ms: 1000, ..config(500) }, 0).unwrap();
    log.append(&mut build_batch(0, &[1], 10), 0, 0).unwrap();
    log.append(&mut build_batch(0, &[1], 10), 0, 500).unwrap();
    assert_eq!(log.segment_count(), 1);
    log.append(&mut build_batch(0, &[1], 10), 0, 1_500).unwrap();
    assert_eq!(log.segment_count(), 2);
    // Bigger than segment.bytes: goes alone into a fresh segment.
    log.append(&mut build_batch(0, &[1], 1000), 0, 1_600).unwrap();
    assert_eq!(log.segment_count(), 3);
    assert_eq!(log.segments[2].base_offset(), 3);
    log.append(&mut build_batch(0, &[1], 10), 0, 1_600).unwrap();
    assert_eq!(log.segment_count(), 4);
}

#[test]
fn rejected_append_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1 << 20), 0).unwrap();
    fill(&mut log, 2);
    let size = log.size_bytes();
    let mut good = build_batch(0, &[1], 10);
    let mut torn = good.clone();
    torn.extend_from_slice(&good[..good.len() - 1]);
    assert!(matches!(log.append(&mut torn, 0, 0), Err(StorageError::Batch(_))));
    assert_eq!((log.log_end_offset(), log.size_bytes()), (6, size));
    assert_eq!(log.append(&mut good, 0, 0).unwrap().base_offset, 6);
}

#[test]
fn batch_headers_from_spans_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1000), 0).unwrap();
    fill(&mut log, 20);
    let headers = log.batch_headers_from(4).unwrap();
    let bases: Vec<i64> = headers.iter().map(|h| h.base_offset).collect();
    assert_eq!(bases, (1..20).map(|i| 3 * i).collect::<Vec<_>>());
    assert!(log.batch_headers_from(60).unwrap().is_empty());
    assert!(log.batch_headers_from(61).is_err());
}

#[test]
fn open_removes_stray_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1 << 20), 0).unwrap();
    fill(&mut log, 2);
    log.close().unwrap();
    for name in ["00000000000000000000.log.deleted", "00000000000000000007.log.swap", "x.tmp"] {
        fs::write(dir.path().join(name), b"junk").unwrap();
    }
    fs::write(dir.path().join(segment_file_name(999, INDEX_SUFFIX)), b"").unwrap();
    let log = reopen(dir.path(), config(1 << 20));
    assert_eq!(log.log_end_offset(), 6);
    let mut names: Vec<String> =
        fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "00000000000000000000.index",
            "00000000000000000000.log",
            "00000000000000000000.timeindex",
            "leader-epoch-checkpoint",
            "recovery-point-checkpoint"
        ]
    );
    log.delete().unwrap();
    assert!(!dir.path().exists());
}

#[test]
fn segments_below_recovery_point_are_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1000), 0).unwrap();
    fill(&mut log, 20);
    log.flush().unwrap();
    let log_end_offset = log.log_end_offset();
    let (pos, _) = log.segments[0].find_batch(3).unwrap().unwrap();
    drop(log); // unclean, but everything is below the recovery point
    let first_log = dir.path().join(segment_file_name(0, LOG_SUFFIX));
    OpenOptions::new().write(true).open(&first_log).unwrap().write_all_at(&[0xff], pos + 70).unwrap();

    // The flipped byte is inside a record, not a header: only a CRC scan would see it.
    let log = reopen(dir.path(), config(1000));
    assert_eq!(log.log_end_offset(), log_end_offset);
}

#[test]
fn segments_hold_no_descriptors_beyond_the_shared_cache() {
    let dir = tempfile::tempdir().unwrap();
    let files = FileCache::new(2);
    let logs: Vec<PathBuf> = (0..3).map(|p| dir.path().join(format!("t-{p}"))).collect();
    let mut expected = Vec::new();
    for path in &logs {
        let mut log = PartitionLog::open_with_files(path, config(1000), 0, Arc::clone(&files)).unwrap();
        fill(&mut log, 20);
        assert!(log.segment_count() >= 5);
        assert!(files.open_count() <= 2);
        expected.push(log.read(0, usize::MAX, i64::MAX).unwrap());
        log.close().unwrap();
    }
    // Reopened together, every segment of every log is read through a cache of two:
    // sealed segments are opened when read and evicted again, with the same bytes.
    let opened: Vec<PartitionLog> = logs
        .iter()
        .map(|path| PartitionLog::open_with_files(path, config(1000), 0, Arc::clone(&files)).unwrap())
        .collect();
    let opens_before_reads = files.opens();
    for _ in 0..2 {
        for (log, want) in opened.iter().zip(&expected) {
            assert_eq!(&log.read(0, usize::MAX, i64::MAX).unwrap(), want);
            assert!(!log.read(31, 1, i64::MAX).unwrap().is_empty());
            assert!(files.open_count() <= 2);
        }
    }
    assert!(files.opens() > opens_before_reads, "evicted segments were reopened to be read");
    drop(opened);
    assert_eq!(files.open_count(), 0, "a closed log leaves nothing in the cache");
}

#[test]
fn an_idle_log_flushes_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1 << 20), 0).unwrap();
    fill(&mut log, 3);
    assert!(log.needs_flush());
    log.flush().unwrap();
    assert!(!log.needs_flush());
    let checkpoint = dir.path().join(RECOVERY_POINT_CHECKPOINT);
    let written = fs::metadata(&checkpoint).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    log.flush().unwrap();
    assert_eq!(fs::metadata(&checkpoint).unwrap().modified().unwrap(), written);
    fill(&mut log, 1);
    assert!(log.needs_flush());
}

/// A flush the policy asks for (flush.messages) that fails after the batch was written
/// cuts the batch back: the append is all or nothing, so a failure the log dir survives
/// (a descriptor shortage) does not leave it in the log for a producer's retry to be
/// appended a second time.
#[test]
fn an_append_whose_flush_fails_is_cut_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let mut log = PartitionLog::open(&path, LogConfig { flush_messages: 1, ..config(1 << 20) }, 0).unwrap();
    fill(&mut log, 1);
    // The recovery-point checkpoint cannot be written while a directory stands where its
    // temporary file goes.
    let blocker = path.join(format!("{RECOVERY_POINT_CHECKPOINT}.tmp"));
    fs::create_dir(&blocker).unwrap();
    let mut batch = build_batch(0, &[20_000, 20_001], 50);
    assert!(log.append(&mut batch, 0, 1_000).is_err());
    assert_eq!(log.log_end_offset(), 3, "the batch whose flush failed is not in the log");
    assert!(log.recovery_point() <= 3, "nothing past the log end is claimed flushed");
    fs::remove_dir(&blocker).unwrap();
    let mut batch = build_batch(0, &[20_000, 20_001], 50);
    assert_eq!(log.append(&mut batch, 0, 1_000).unwrap().base_offset, 3, "the retry takes the same offsets");
    drop(log);
    let log = reopen(&path, config(1 << 20));
    assert_eq!(log.log_end_offset(), 5);
}
