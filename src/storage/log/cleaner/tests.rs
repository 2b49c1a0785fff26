//! The log cleaner: what survives a pass, offsets, tombstones, producer state, crashes.

use std::fs;
use std::path::Path;

use super::*;
use crate::storage::batch::split_batches;
use crate::storage::log::LogConfig;
use crate::storage::test_util::{build_records_batch, gzipped, TestRecord};

/// The tests' clock: the wall clock when first asked, since segment mtimes are real.
fn now() -> i64 {
    static T: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *T.get_or_init(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64)
}

fn compacted(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 100,
        retention_ms: 1,
        cleanup_delete: false,
        cleanup_compact: true,
        delete_retention_ms: 1_000,
        min_cleanable_dirty_permille: 0,
        ..LogConfig::default()
    }
}

/// Appends one batch of `(key, value)` records stamped `ts`; returns its base offset.
fn put(log: &mut PartitionLog, recs: &[(&str, Option<&str>)], ts: i64, producer_id: i64) -> i64 {
    let records: Vec<TestRecord> = recs
        .iter()
        .map(|(k, v)| TestRecord { key: Some(k.as_bytes()), value: v.map(str::as_bytes), timestamp: ts })
        .collect();
    let mut batch = build_records_batch(0, &records, producer_id);
    log.append(&mut batch, 0, ts).unwrap().base_offset
}

/// Every record in the log as `(offset, key, value)`, checking each batch's CRC.
fn contents(log: &PartitionLog) -> Vec<(i64, String, Option<String>)> {
    let bytes = log.read(log.log_start_offset(), usize::MAX, i64::MAX).unwrap();
    let mut out = Vec::new();
    let mut pos = 0;
    for h in split_batches(&bytes).unwrap_or_default() {
        let batch = &bytes[pos..pos + h.total_len()];
        crate::storage::batch::check_batch(&h, batch).unwrap();
        let (data, recs) = readable_records(&h, batch).unwrap();
        for r in recs {
            let key = String::from_utf8(data[r.key.clone().unwrap()].to_vec()).unwrap();
            let value = (!r.value_is_null).then(|| value_of(&data, &r));
            out.push((r.offset, key, value));
        }
        pos += h.total_len();
    }
    out
}

/// The value of a non-null record: after the key, a zigzag varint length and the bytes.
fn value_of(batch: &[u8], r: &crate::storage::record::RecordView) -> String {
    let key = r.key.clone().unwrap();
    let (mut pos, mut raw, mut shift) = (key.end, 0u64, 0);
    loop {
        let b = batch[pos];
        pos += 1;
        raw |= u64::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            break;
        }
    }
    let len = (raw >> 1) as usize; // zigzag, non-negative here
    String::from_utf8(batch[pos..pos + len].to_vec()).unwrap()
}

fn rounds(log: &mut PartitionLog, n: usize) {
    for round in 0..n {
        for key in ["a", "b", "c"] {
            let v = format!("{key}{round}");
            put(log, &[(key, Some(v.as_str()))], now(), -1);
        }
    }
}

#[test]
fn keeps_the_newest_record_per_key_at_its_original_offset() {
    let dir = tempfile::tempdir().unwrap();
    // Every batch in a segment of its own; the last one is the active segment.
    let mut log = PartitionLog::open(dir.path(), compacted(1), now()).unwrap();
    rounds(&mut log, 10);
    let before = contents(&log);
    let end = log.log_end_offset();
    let active_base = log.active().base_offset();
    let segments_before = log.segment_count();
    assert!(segments_before > 4, "{segments_before} segments");

    let stats = log.clean(now()).unwrap().expect("a pass ran");
    assert!(stats.records_removed > 0 && stats.bytes_after < stats.bytes_before, "{stats:?}");
    let after = contents(&log);
    // Nothing renumbered, nothing invented: every survivor is the original record.
    for rec in &after {
        assert!(before.contains(rec), "{rec:?} was not in the log before");
    }
    // Below the active segment each key appears once, as its newest sealed record.
    let sealed: Vec<_> = after.iter().filter(|r| r.0 < active_base).collect();
    for key in ["a", "b", "c"] {
        let newest_sealed = before.iter().rfind(|r| r.1 == key && r.0 < active_base).unwrap();
        let kept: Vec<_> = sealed.iter().filter(|r| r.1 == key).collect();
        assert_eq!(kept, vec![&newest_sealed], "key {key}");
    }
    // The active segment is untouched and the offsets around the log are unchanged.
    let active_before: Vec<_> = before.iter().filter(|r| r.0 >= active_base).collect();
    let active_after: Vec<_> = after.iter().filter(|r| r.0 >= active_base).collect();
    assert_eq!(active_before, active_after);
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(log.log_start_offset(), 0);
    // Reading from a removed offset returns the next surviving batch.
    let first_gap = (0..end).find(|o| !after.iter().any(|r| r.0 == *o)).unwrap();
    let from_gap = log.read(first_gap, 1, i64::MAX).unwrap();
    let h = split_batches(&from_gap).unwrap()[0];
    assert!(h.last_offset() >= first_gap);

    // Nothing new: the next pass has nothing to do.
    assert_eq!(log.clean(now()).unwrap(), None);
    // The result survives a reopen, clean or not.
    drop(log);
    let mut log = PartitionLog::open(dir.path(), compacted(1), now()).unwrap();
    assert_eq!(contents(&log), after);
    // Where the cleaned part ends is checkpointed: nothing is dirty after a restart.
    assert_eq!(log.clean(now()).unwrap(), None);

    // With room in segment.bytes, the next pass merges the small cleaned segments.
    log.set_config(compacted(1 << 20));
    put(&mut log, &[("a", Some("new"))], now(), -1);
    log.set_config(compacted(1));
    put(&mut log, &[("z", Some("z"))], now(), -1);
    log.set_config(compacted(1 << 20));
    log.clean(now()).unwrap().expect("a pass ran");
    assert_eq!(log.segment_count(), 2, "one cleaned segment and the active one");
    assert!(segments_before > 2);
}

#[test]
fn a_batch_loses_only_its_older_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), compacted(1), now()).unwrap();
    put(&mut log, &[("a", Some("a0")), ("b", Some("b0")), ("c", Some("c0"))], now(), -1);
    put(&mut log, &[("b", Some("b1"))], now() + 5, -1);
    put(&mut log, &[("z", Some("z"))], now(), -1); // the active segment
    log.clean(now()).unwrap().expect("a pass ran");
    let after = contents(&log);
    assert_eq!(
        after,
        vec![
            (0, "a".into(), Some("a0".into())),
            (2, "c".into(), Some("c0".into())),
            (3, "b".into(), Some("b1".into())),
            (4, "z".into(), Some("z".into())),
        ]
    );
    // The first batch keeps its base offset and last offset delta.
    let bytes = log.read(0, 1, i64::MAX).unwrap();
    let h = split_batches(&bytes).unwrap()[0];
    assert_eq!((h.base_offset, h.last_offset(), h.records_count), (0, 2, 2));
}

#[test]
fn tombstones_stay_for_delete_retention_ms_then_go() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), compacted(1), now()).unwrap();
    put(&mut log, &[("gone", Some("v"))], now(), -1);
    put(&mut log, &[("kept", Some("k"))], now(), -1);
    put(&mut log, &[("gone", None)], now(), -1);
    put(&mut log, &[("x", Some("x"))], now(), -1);
    log.clean(now()).unwrap().expect("a pass ran");
    let keys: Vec<_> = contents(&log).into_iter().map(|r| (r.1, r.2)).collect();
    assert!(keys.contains(&("gone".into(), None)), "tombstone kept while young: {keys:?}");
    assert!(!keys.contains(&("gone".into(), Some("v".into()))));

    // Later, with new dirty data, the tombstone has aged out: 5 s after the wall clock now,
    // so after its segment's last write, with 1 s of retention.
    let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let later = wall + 5_000;
    put(&mut log, &[("y", Some("y"))], later, -1);
    put(&mut log, &[("y", Some("y2"))], later, -1);
    log.clean(later).unwrap().expect("a pass ran");
    let keys: Vec<_> = contents(&log).into_iter().map(|r| r.1).collect();
    assert!(!keys.contains(&"gone".to_owned()), "{keys:?}");
    assert!(keys.contains(&"kept".to_owned()));
}

#[test]
fn an_idempotent_producers_last_batch_stays_even_when_emptied() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), compacted(1), now()).unwrap();
    put(&mut log, &[("a", Some("1"))], now(), 7);
    put(&mut log, &[("a", Some("2"))], now(), 7);
    put(&mut log, &[("a", Some("3"))], now(), -1);
    put(&mut log, &[("b", Some("b"))], now(), -1);
    log.clean(now()).unwrap().expect("a pass ran");
    let bytes = log.read(0, usize::MAX, i64::MAX).unwrap();
    let headers = split_batches(&bytes).unwrap();
    let of_producer: Vec<_> = headers.iter().filter(|h| h.producer_id == 7).collect();
    assert_eq!(of_producer.len(), 1, "only the last batch of producer 7 stays");
    assert_eq!((of_producer[0].base_offset, of_producer[0].records_count), (1, 0));
    assert_eq!(contents(&log).into_iter().map(|r| r.0).collect::<Vec<_>>(), vec![2, 3]);
}

#[test]
fn only_compacted_logs_are_cleaned_and_compact_alone_skips_retention() {
    let dir = tempfile::tempdir().unwrap();
    let mut log =
        PartitionLog::open(dir.path(), LogConfig { cleanup_compact: false, ..compacted(200) }, now()).unwrap();
    rounds(&mut log, 3);
    assert_eq!(log.clean(now()).unwrap(), None);

    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), compacted(200), now()).unwrap();
    rounds(&mut log, 3);
    let segments = log.segment_count();
    // retention.ms is 1 ms, but cleanup.policy is compact only.
    assert_eq!(log.enforce_retention(now() + 1_000_000).unwrap(), 0);
    assert_eq!(log.segment_count(), segments);
}

#[test]
fn the_dirty_ratio_gates_a_pass() {
    let dir = tempfile::tempdir().unwrap();
    let mut log =
        PartitionLog::open(dir.path(), LogConfig { min_cleanable_dirty_permille: 900, ..compacted(200) }, now())
            .unwrap();
    rounds(&mut log, 6);
    log.clean(now()).unwrap().expect("everything is dirty at first");
    // A little new data next to the cleaned part is below 90% dirty.
    put(&mut log, &[("d", Some("d"))], now(), -1);
    put(&mut log, &[("e", Some("e"))], now(), -1);
    assert!(log.dirty_permille(now()) < 900, "{}", log.dirty_permille(now()));
    assert_eq!(log.clean(now()).unwrap(), None);
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn an_interrupted_swap_is_finished_on_open_and_a_partial_output_discarded() {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    let mut log = PartitionLog::open(&a, compacted(100_000), now()).unwrap();
    // One big sealed segment (rolled by size) and the active one.
    rounds(&mut log, 5);
    log.set_config(compacted(100));
    put(&mut log, &[("roll", Some("r"))], now(), -1);
    put(&mut log, &[("tail", Some("t"))], now(), -1);
    log.close().unwrap();
    copy_dir(&a, &b);

    let mut log = PartitionLog::open(&a, compacted(100), now()).unwrap();
    let sealed_base = log.segments[0].base_offset();
    log.clean(now()).unwrap().expect("a pass ran");
    let cleaned = contents(&log);
    drop(log);

    // b: the state right after the swap directory was renamed into place, with the new
    // offset index already moved (a crash in the middle of finishing the swap).
    let swap = b.join(SWAP_DIR);
    fs::create_dir(&swap).unwrap();
    for suffix in ["log", "timeindex"] {
        let name = crate::storage::segment::segment_file_name(sealed_base, suffix);
        fs::copy(a.join(&name), swap.join(&name)).unwrap();
    }
    let index = crate::storage::segment::segment_file_name(sealed_base, "index");
    fs::copy(a.join(&index), b.join(&index)).unwrap();
    fs::write(swap.join(REPLACES_FILE), format!("{sealed_base}\n")).unwrap();
    // And a half-written output of a later pass.
    fs::create_dir(b.join(CLEANING_DIR)).unwrap();
    fs::write(b.join(CLEANING_DIR).join("junk.log"), b"partial").unwrap();

    let log = PartitionLog::open(&b, compacted(100), now()).unwrap();
    assert_eq!(contents(&log), cleaned);
    assert!(!b.join(SWAP_DIR).exists() && !b.join(CLEANING_DIR).exists());
}

#[test]
fn compressed_batches_are_compacted_and_rewritten_uncompressed() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), compacted(1), now()).unwrap();
    let recs = |vals: &[(&'static str, &'static str)]| -> Vec<u8> {
        let records: Vec<TestRecord> = vals
            .iter()
            .map(|(k, v)| TestRecord { key: Some(k.as_bytes()), value: Some(v.as_bytes()), timestamp: now() })
            .collect();
        gzipped(&build_records_batch(0, &records, -1))
    };
    log.append(&mut recs(&[("a", "a0"), ("b", "b0"), ("c", "c0")]), 0, now()).unwrap();
    log.append(&mut recs(&[("a", "a1"), ("b", "b1")]), 0, now()).unwrap();
    put(&mut log, &[("z", Some("z"))], now(), -1); // the active segment
    let stats = log.clean(now()).unwrap().expect("a pass ran");
    assert_eq!(stats.records_removed, 2);
    assert_eq!(
        contents(&log),
        vec![
            (2, "c".into(), Some("c0".into())),
            (3, "a".into(), Some("a1".into())),
            (4, "b".into(), Some("b1".into())),
            (5, "z".into(), Some("z".into())),
        ]
    );
    // The first batch lost records: rewritten uncompressed at its base offset. The second
    // lost none: kept compressed, byte for byte.
    let bytes = log.read(0, usize::MAX, i64::MAX).unwrap();
    let headers = split_batches(&bytes).unwrap();
    assert_eq!((headers[0].base_offset, headers[0].last_offset(), headers[0].compression()), (0, 2, Compression::None));
    assert_eq!(headers[1].compression(), Compression::Gzip);
}

#[test]
fn appends_during_a_pass_are_kept_and_a_changed_log_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), compacted(1), now()).unwrap();
    rounds(&mut log, 4);
    // Prepared without the lock while a producer appends (and rolls) meanwhile.
    let prepared = log.plan_clean(now()).unwrap().prepare(now()).unwrap();
    put(&mut log, &[("a", Some("during"))], now(), -1);
    put(&mut log, &[("z", Some("z"))], now(), -1);
    let before_finish = contents(&log);
    let stats = log.finish_clean(prepared).unwrap();
    assert!(stats.records_removed > 0);
    let after = contents(&log);
    assert!(after.iter().all(|r| before_finish.contains(r)));
    assert!(after.contains(&(12, "a".into(), Some("during".into()))), "{after:?}");
    assert!(!dir.path().join(CLEANING_DIR).exists());

    // Here DeleteRecords removes the first segments between prepare and finish: the
    // prepared groups no longer match and nothing is swapped in.
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), compacted(1), now()).unwrap();
    rounds(&mut log, 4);
    let prepared = log.plan_clean(now()).unwrap().prepare(now()).unwrap();
    log.delete_records_before(3).unwrap();
    let before_finish = contents(&log);
    let stats = log.finish_clean(prepared).unwrap();
    assert_eq!((stats.segments_after, stats.records_removed), (0, 0));
    assert_eq!(contents(&log), before_finish);
    assert!(!dir.path().join(CLEANING_DIR).exists());
    // The next pass cleans what is there now.
    assert!(log.clean(now()).unwrap().unwrap().records_removed > 0);
}

#[test]
fn a_compressed_batch_that_loses_records_is_recompressed_with_its_codec() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), compacted(1), now()).unwrap();
    let value = "v".repeat(200);
    let keys: Vec<String> = (0..20).map(|i| format!("k{i:02}")).collect();
    let mut records: Vec<TestRecord> = keys
        .iter()
        .map(|k| TestRecord { key: Some(k.as_bytes()), value: Some(value.as_bytes()), timestamp: now() })
        .collect();
    records.push(TestRecord { key: Some(b"old"), value: Some(b"1"), timestamp: now() });
    log.append(&mut gzipped(&build_records_batch(0, &records, -1)), 0, now()).unwrap();
    put(&mut log, &[("old", Some("2"))], now(), -1);
    put(&mut log, &[("z", Some("z"))], now(), -1); // the active segment
    assert_eq!(log.clean(now()).unwrap().unwrap().records_removed, 1);
    let bytes = log.read(0, usize::MAX, i64::MAX).unwrap();
    let h = split_batches(&bytes).unwrap()[0];
    assert_eq!((h.compression(), h.records_count, h.last_offset()), (Compression::Gzip, 20, 20));
    let after = contents(&log);
    assert_eq!(after.len(), 22);
    assert_eq!(after[19], (19, "k19".into(), Some(value.clone())));
    assert_eq!(after[20], (21, "old".into(), Some("2".into())));
}

#[test]
fn compaction_lags_hold_young_data_back_and_force_old_data_through() {
    let dir = tempfile::tempdir().unwrap();
    let lagged = LogConfig { min_compaction_lag_ms: 1_000, ..compacted(1) };
    let mut log = PartitionLog::open(dir.path(), lagged, now()).unwrap();
    rounds(&mut log, 3);
    // Every record is younger than min.compaction.lag.ms.
    assert_eq!(log.clean(now() + 999).unwrap(), None);
    assert!(log.clean(now() + 1_000).unwrap().unwrap().records_removed > 0);

    // Below min.cleanable.dirty.ratio, but older than max.compaction.lag.ms: cleaned.
    let dir = tempfile::tempdir().unwrap();
    let picky = LogConfig { min_cleanable_dirty_permille: 1_000, ..compacted(1) };
    let mut log = PartitionLog::open(dir.path(), picky.clone(), now()).unwrap();
    rounds(&mut log, 3);
    log.clean(now()).unwrap().expect("all dirty at first");
    rounds(&mut log, 1);
    assert_eq!(log.clean(now()).unwrap(), None, "not dirty enough");
    log.set_config(LogConfig { max_compaction_lag_ms: 5_000, ..picky });
    assert_eq!(log.clean(now() + 5_000).unwrap(), None, "not overdue yet");
    assert!(log.clean(now() + 5_001).unwrap().is_some(), "overdue");
}

#[test]
fn a_small_key_map_cleans_in_steps_and_never_stalls() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), compacted(1), now()).unwrap();
    // Room for about three distinct keys per pass: each pass maps what fits and cleans up
    // to there; the next pass starts where it stopped.
    log.cleaner_map_bytes = 3 * (MAP_ENTRY_OVERHEAD + 1);
    for round in 0..3 {
        for key in ["a", "b", "c", "d", "e", "f"] {
            let v = format!("{key}{round}");
            put(&mut log, &[(key, Some(v.as_str()))], now(), -1);
        }
    }
    put(&mut log, &[("z", Some("z"))], now(), -1); // the active segment
    let before = contents(&log);
    let mut passes = 0;
    while log.clean(now()).unwrap().is_some() {
        passes += 1;
        assert!(passes < 20, "cleaning does not converge");
    }
    assert!(passes > 1, "{passes} passes");
    // The same end as with a map big enough: each key once, as its newest record.
    let after = contents(&log);
    let mut expected: Vec<_> = ["a", "b", "c", "d", "e", "f", "z"]
        .iter()
        .map(|key| before.iter().rfind(|r| r.1 == *key).unwrap().clone())
        .collect();
    expected.sort();
    assert_eq!(after, expected);
}

#[test]
fn a_segment_with_more_keys_than_the_map_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), compacted(1 << 20), now()).unwrap();
    log.cleaner_map_bytes = 2 * (MAP_ENTRY_OVERHEAD + 1);
    put(&mut log, &[("a", Some("1")), ("b", Some("1")), ("c", Some("1")), ("a", Some("2"))], now(), -1);
    log.set_config(compacted(1));
    put(&mut log, &[("z", Some("z"))], now(), -1); // rolls: the first batch is sealed
    let before = contents(&log);
    let stats = log.clean(now()).unwrap().expect("a pass ran");
    assert_eq!((stats.segments_after, stats.records_removed), (0, 0));
    assert_eq!(contents(&log), before);
    // Given up until a restart: no more passes.
    put(&mut log, &[("y", Some("y"))], now(), -1);
    assert_eq!(log.clean(now()).unwrap(), None);
}

#[test]
fn a_tombstone_with_an_old_timestamp_is_kept_for_delete_retention_ms() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), compacted(1), now()).unwrap();
    put(&mut log, &[("gone", Some("v"))], 1_000, -1);
    put(&mut log, &[("gone", None)], 1_000, -1); // producer timestamp from 1970
    put(&mut log, &[("x", Some("x"))], now(), -1);
    log.clean(now()).unwrap().expect("a pass ran");
    assert!(contents(&log).contains(&(1, "gone".into(), None)), "kept: its segment took it just now");
}
