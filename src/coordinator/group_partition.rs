//! Which `__consumer_offsets` partition holds a group: Kafka's
//! `Utils.abs(groupId.hashCode()) % partitionCount`, bit for bit, so that a group lands on
//! the same partition (and so the same coordinator) as on a Kafka broker with the same
//! partition count, and an existing log keeps every group where it is.

/// Java's `String.hashCode`: `s[0]*31^(n-1) + … + s[n-1]` over the UTF-16 code units,
/// in wrapping 32-bit arithmetic.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(i32::from(unit)))
}

/// Kafka's `Utils.abs`: `Math.abs`, except that `Integer.MIN_VALUE` (whose `Math.abs` is
/// itself, negative) is 0.
fn kafka_abs(n: i32) -> i32 {
    if n == i32::MIN {
        0
    } else {
        n.abs()
    }
}

/// The partition of `__consumer_offsets` that coordinates `group_id`, of `partitions`
/// (at least 1).
pub fn partition_for(group_id: &str, partitions: i32) -> i32 {
    kafka_abs(java_string_hash(group_id)) % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (group id, Java `hashCode`, partition of 50, partition of 7), printed by a Java 17
    /// program calling `String.hashCode` and Kafka's `Utils.abs` formula.
    const JAVA: &[(&str, i32, i32, i32)] = &[
        ("g", 103, 3, 5),
        ("g1", 3242, 42, 1),
        ("g2", 3243, 43, 2),
        ("my-group", -1906497762, 12, 1),
        ("test-group", 627841412, 12, 2),
        ("console-consumer-12345", 158455506, 6, 6),
        ("Aa", 2112, 12, 5),
        ("BB", 2112, 12, 5),
        ("polygenelubricants", i32::MIN, 0, 0),
        ("é-grüppe", -1897389896, 46, 3),
        ("😀group", -1231696132, 32, 2),
        ("a-very-long-group-id-with-many-characters-0123456789", -509355037, 37, 2),
    ];

    #[test]
    fn groups_land_where_kafka_puts_them() {
        for &(group, hash, of50, of7) in JAVA {
            assert_eq!(java_string_hash(group), hash, "{group}");
            assert_eq!(partition_for(group, 50), of50, "{group}");
            assert_eq!(partition_for(group, 7), of7, "{group}");
            assert_eq!(partition_for(group, 1), 0, "{group}");
        }
    }

    #[test]
    fn the_empty_group_id_is_partition_0() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(partition_for("", 50), 0);
    }
}
