//! LogSegment: append, lookup, reopen, recovery, truncation.

use super::*;
use crate::storage::batch::{set_base_offset, split_batches};
use crate::storage::file_cache::FileCache;
use crate::storage::test_util::build_batch;

/// Appends `count` single-batch appends of 3 records each, starting at the segment's end.
fn fill(seg: &mut LogSegment, count: usize) {
    for i in 0..count {
        let mut b = build_batch(0, &[1000 + i as i64, 1001, 1002], 100);
        set_base_offset(&mut b, seg.next_offset());
        let headers = split_batches(&b).unwrap();
        seg.append(&b, &headers, 5).unwrap();
    }
}

#[test]
fn append_find_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut seg = LogSegment::create(dir.path(), 100, 300, &FileCache::private()).unwrap();
    fill(&mut seg, 20);
    assert_eq!(seg.next_offset(), 160);
    assert!(!seg.offset_index().is_empty());
    for offset in [100, 101, 102, 103, 150, 159] {
        let (pos, h) = seg.find_batch(offset).unwrap().unwrap();
        assert!(h.base_offset <= offset && offset <= h.last_offset());
        assert_eq!(seg.read_header(pos).unwrap(), Some(h));
    }
    assert!(seg.find_batch(160).unwrap().is_none());
    assert_eq!(seg.max_timestamp(), Some((1019, 157)));
    seg.seal().unwrap();
    let size = seg.size();
    drop(seg);

    let (seg, cut) = LogSegment::open(dir.path(), 100, 300, false, &FileCache::private()).unwrap();
    assert_eq!((cut, seg.size(), seg.next_offset()), (0, size, 160));
    assert_eq!(seg.max_timestamp(), Some((1019, 157)));
    assert_eq!(seg.find_batch(131).unwrap().unwrap().1.base_offset, 130);
}

#[test]
fn recover_cuts_torn_tail_and_rebuilds_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let mut seg = LogSegment::create(dir.path(), 0, 300, &FileCache::private()).unwrap();
    fill(&mut seg, 10);
    let good_size = seg.size();
    let entries = seg.offset_index().len();
    // A torn half batch after the good ones.
    let half = build_batch(30, &[1], 100);
    seg.log.get().unwrap().write_all_at(&half[..half.len() / 2], good_size).unwrap();
    drop(seg);
    fs::remove_file(dir.path().join(segment_file_name(0, INDEX_SUFFIX))).unwrap();

    let (seg, cut) = LogSegment::open(dir.path(), 0, 300, true, &FileCache::private()).unwrap();
    assert_eq!(cut, (half.len() / 2) as u64);
    assert_eq!((seg.size(), seg.next_offset()), (good_size, 30));
    assert_eq!(seg.offset_index().len(), entries);
    assert_eq!(seg.find_batch(22).unwrap().unwrap().1.base_offset, 21);
}

#[test]
fn recover_cuts_at_crc_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let mut seg = LogSegment::create(dir.path(), 0, 300, &FileCache::private()).unwrap();
    fill(&mut seg, 5);
    let (pos, _) = seg.find_batch(9).unwrap().unwrap();
    seg.log.get().unwrap().write_all_at(&[0xee], pos + 70).unwrap();
    let size = seg.size();
    assert_eq!(seg.recover().unwrap(), size - pos);
    assert_eq!((seg.size(), seg.next_offset()), (pos, 9));
}

#[test]
fn truncate_to_drops_containing_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut seg = LogSegment::create(dir.path(), 0, 300, &FileCache::private()).unwrap();
    fill(&mut seg, 10);
    seg.truncate_to(16).unwrap();
    assert_eq!(seg.next_offset(), 15);
    fill(&mut seg, 1);
    assert_eq!(seg.next_offset(), 18);
    assert_eq!(seg.find_batch(16).unwrap().unwrap().1.base_offset, 15);
    seg.truncate_to(0).unwrap();
    assert!(seg.is_empty());
    assert_eq!((seg.next_offset(), seg.max_timestamp(), seg.created_ms()), (0, None, None));
}
