//! Where a produced record goes when the request names no partition: a keyed record to
//! the partition the Java client's default partitioner picks (so HTTP and Kafka
//! producers agree on which partition holds a key), a keyless one to the next partition
//! in turn, all keyless records of one request together (sticky per request).

use std::sync::atomic::{AtomicU32, Ordering};

/// The seed of Kafka's `Utils.murmur2`.
const KAFKA_SEED: u32 = 0x9747_b28c;

/// Kafka's `Utils.murmur2`: MurmurHash2 of the key bytes, read little-endian.
pub fn murmur2(key: &[u8]) -> i32 {
    murmur2::murmur2(key, KAFKA_SEED) as i32
}

/// `Utils.toPositive(Utils.murmur2(key)) % partitions`, as `BuiltInPartitioner`.
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partitions.max(1)
}

/// The round robin of keyless requests.
#[derive(Debug, Default)]
pub struct KeylessPartitioner {
    next: AtomicU32,
}

impl KeylessPartitioner {
    pub fn next(&self, partitions: i32) -> i32 {
        (self.next.fetch_add(1, Ordering::Relaxed) % partitions.max(1) as u32) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectors of Kafka's `UtilsTest.testMurmur2`.
    #[test]
    fn murmur2_matches_kafka() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58_897_971),
            (b"abc", 479_470_107),
        ];
        for (key, want) in cases {
            assert_eq!(murmur2(key), want, "{:?}", String::from_utf8_lossy(key));
        }
        assert_eq!(partition_for_key(b"abc", 7), 479_470_107 % 7);
        assert_eq!(partition_for_key(b"21", 7), (-973_932_308i32 & 0x7fff_ffff) % 7);
    }

    #[test]
    fn keyless_requests_take_turns() {
        let p = KeylessPartitioner::default();
        assert_eq!((0..5).map(|_| p.next(3)).collect::<Vec<_>>(), vec![0, 1, 2, 0, 1]);
    }
}
