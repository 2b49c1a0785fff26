//! Records of the `__consumer_offsets` topic, in Kafka's own key/value formats so that
//! the topic reads the same as Kafka's.
//!
//! Keys (big-endian, strings are i16 length + UTF-8):
//! * version 0 or 1: committed offset — `group, topic, partition: i32`
//! * version 2: group metadata — `group`
//!
//! Values (a null value is a tombstone: the offset or group is deleted):
//! * offset, version 3: `offset: i64, leader_epoch: i32, metadata: string, commit_timestamp: i64`
//!   (version 1, read only: `offset, metadata, commit_timestamp, expire_timestamp: i64`)
//! * group, version 3: `protocol_type: string, generation: i32, protocol: nullable string,
//!   leader: nullable string, current_state_timestamp: i64, members: [member_id, group_instance_id
//!   (nullable), client_id, client_host, rebalance_timeout: i32, session_timeout: i32,
//!   subscription: bytes (i32 length), assignment: bytes]`
//!
//! A write is one uncompressed v2 batch of such records (offsets from 0, stamped by the
//! log), so a group's records of one decision land or fail together.

use bytes::{BufMut, Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use super::group::RestoredMember;

#[derive(Debug, Clone, PartialEq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub state_timestamp: i64,
    pub members: Vec<RestoredMember>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum OffsetsRecord {
    Offset { group: String, topic: String, partition: i32, value: Option<CommittedOffset> },
    Group { group: String, value: Option<GroupValue> },
}

fn put_str(b: &mut BytesMut, s: &str) {
    let len = s.len().min(i16::MAX as usize);
    b.put_i16(len as i16);
    b.put_slice(&s.as_bytes()[..len]);
}

fn put_nullable_str(b: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_str(b, s),
        None => b.put_i16(-1),
    }
}

fn put_bytes(b: &mut BytesMut, v: &[u8]) {
    b.put_i32(v.len() as i32);
    b.put_slice(v);
}

impl OffsetsRecord {
    pub fn key(&self) -> Bytes {
        let mut b = BytesMut::new();
        match self {
            OffsetsRecord::Offset { group, topic, partition, .. } => {
                b.put_i16(1);
                put_str(&mut b, group);
                put_str(&mut b, topic);
                b.put_i32(*partition);
            }
            OffsetsRecord::Group { group, .. } => {
                b.put_i16(2);
                put_str(&mut b, group);
            }
        }
        b.freeze()
    }

    pub fn value(&self) -> Option<Bytes> {
        let mut b = BytesMut::new();
        match self {
            OffsetsRecord::Offset { value, .. } => {
                let v = value.as_ref()?;
                b.put_i16(3);
                b.put_i64(v.offset);
                b.put_i32(v.leader_epoch);
                put_str(&mut b, &v.metadata);
                b.put_i64(v.commit_timestamp);
            }
            OffsetsRecord::Group { value, .. } => {
                let v = value.as_ref()?;
                b.put_i16(3);
                put_str(&mut b, &v.protocol_type);
                b.put_i32(v.generation);
                put_nullable_str(&mut b, v.protocol.as_deref());
                put_nullable_str(&mut b, v.leader.as_deref());
                b.put_i64(v.state_timestamp);
                b.put_i32(v.members.len() as i32);
                for m in &v.members {
                    put_str(&mut b, &m.member_id);
                    put_nullable_str(&mut b, m.group_instance_id.as_deref());
                    put_str(&mut b, &m.client_id);
                    put_str(&mut b, &m.client_host);
                    b.put_i32(m.rebalance_timeout_ms);
                    b.put_i32(m.session_timeout_ms);
                    put_bytes(&mut b, &m.subscription);
                    put_bytes(&mut b, &m.assignment);
                }
            }
        }
        Some(b.freeze())
    }

    /// Decode a record; `None` for a malformed record or an unknown version (skipped on
    /// replay, with a log line by the caller).
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Option<OffsetsRecord> {
        let mut k = Reader(key);
        match k.i16()? {
            0 | 1 => {
                let group = k.string()?;
                let topic = k.string()?;
                let partition = k.i32()?;
                let value = match value {
                    None => None,
                    Some(v) => Some(decode_offset_value(v)?),
                };
                Some(OffsetsRecord::Offset { group, topic, partition, value })
            }
            2 => {
                let group = k.string()?;
                let value = match value {
                    None => None,
                    Some(v) => Some(decode_group_value(v)?),
                };
                Some(OffsetsRecord::Group { group, value })
            }
            _ => None,
        }
    }
}

/// One v2 batch holding `records`, each stamped with `timestamp`.
pub fn encode_batch(records: &[OffsetsRecord], timestamp: i64) -> Result<BytesMut, String> {
    let recs: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, r)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: -1,
            timestamp,
            key: Some(r.key()),
            value: r.value(),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, recs.iter(), &options).map_err(|e| e.to_string())?;
    Ok(buf)
}

/// A record read back from the log: its offset and, unless unreadable, what it says.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedRecord {
    pub offset: i64,
    pub record: Option<OffsetsRecord>,
}

/// Every keyed record of the batches in `bytes`, in log order. Records without a key are
/// not coordinator records and are left out; unreadable ones come back as `None` so the
/// caller can say where they were.
pub fn decode_batches(bytes: &Bytes) -> Result<Vec<LoggedRecord>, String> {
    let mut buf = bytes.clone();
    let sets = RecordBatchDecoder::decode_all(&mut buf).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for set in sets {
        for r in set.records {
            let Some(key) = r.key.as_deref() else { continue };
            out.push(LoggedRecord { offset: r.offset, record: OffsetsRecord::decode(key, r.value.as_deref()) });
        }
    }
    Ok(out)
}

fn decode_offset_value(v: &[u8]) -> Option<CommittedOffset> {
    let mut r = Reader(v);
    match r.i16()? {
        0..=2 => {
            let version_has_expire = true;
            let offset = r.i64()?;
            let metadata = r.string()?;
            let commit_timestamp = r.i64()?;
            if version_has_expire {
                let _ = r.i64();
            }
            Some(CommittedOffset { offset, leader_epoch: -1, metadata, commit_timestamp })
        }
        3 | 4 => {
            let offset = r.i64()?;
            let leader_epoch = r.i32()?;
            let metadata = r.string()?;
            let commit_timestamp = r.i64()?;
            Some(CommittedOffset { offset, leader_epoch, metadata, commit_timestamp })
        }
        _ => None,
    }
}

fn decode_group_value(v: &[u8]) -> Option<GroupValue> {
    let mut r = Reader(v);
    if r.i16()? != 3 {
        return None;
    }
    let protocol_type = r.string()?;
    let generation = r.i32()?;
    let protocol = r.nullable_string()?;
    let leader = r.nullable_string()?;
    let state_timestamp = r.i64()?;
    let count = r.i32()?;
    let mut members = Vec::new();
    for _ in 0..count.max(0) {
        members.push(RestoredMember {
            member_id: r.string()?,
            group_instance_id: r.nullable_string()?,
            client_id: r.string()?,
            client_host: r.string()?,
            rebalance_timeout_ms: r.i32()?,
            session_timeout_ms: r.i32()?,
            subscription: r.bytes()?,
            assignment: r.bytes()?,
        });
    }
    Some(GroupValue { protocol_type, generation, protocol, leader, state_timestamp, members })
}

/// Bounds-checked reads; every method returns `None` past the end.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Some(head)
    }
    fn i16(&mut self) -> Option<i16> {
        self.take(2).map(|b| i16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self) -> Option<i32> {
        self.take(4).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self) -> Option<i64> {
        self.take(8).map(|b| i64::from_be_bytes(b.try_into().unwrap_or([0; 8])))
    }
    fn nullable_string(&mut self) -> Option<Option<String>> {
        let len = self.i16()?;
        if len < 0 {
            return Some(None);
        }
        let b = self.take(len as usize)?;
        Some(Some(String::from_utf8(b.to_vec()).ok()?))
    }
    fn string(&mut self) -> Option<String> {
        self.nullable_string()?
    }
    fn bytes(&mut self) -> Option<Bytes> {
        let len = self.i32()?;
        if len < 0 {
            return Some(Bytes::new());
        }
        Some(Bytes::copy_from_slice(self.take(len as usize)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let recs = vec![
            OffsetsRecord::Offset {
                group: "g".into(),
                topic: "t".into(),
                partition: 3,
                value: Some(CommittedOffset {
                    offset: 42,
                    leader_epoch: 1,
                    metadata: "m".into(),
                    commit_timestamp: 99,
                }),
            },
            OffsetsRecord::Offset { group: "g".into(), topic: "t".into(), partition: 3, value: None },
            OffsetsRecord::Group {
                group: "g".into(),
                value: Some(GroupValue {
                    protocol_type: "consumer".into(),
                    generation: 5,
                    protocol: Some("range".into()),
                    leader: Some("m1".into()),
                    state_timestamp: 7,
                    members: vec![RestoredMember {
                        member_id: "m1".into(),
                        group_instance_id: Some("i".into()),
                        client_id: "c".into(),
                        client_host: "/h".into(),
                        rebalance_timeout_ms: 1,
                        session_timeout_ms: 2,
                        subscription: Bytes::from_static(b"sub"),
                        assignment: Bytes::from_static(b"asg"),
                    }],
                }),
            },
            OffsetsRecord::Group { group: "g".into(), value: None },
        ];
        for r in recs {
            let key = r.key();
            let value = r.value();
            assert_eq!(OffsetsRecord::decode(&key, value.as_deref()), Some(r));
        }
    }

    #[test]
    fn a_batch_round_trips_and_garbage_is_an_error() {
        let recs = vec![
            OffsetsRecord::Offset { group: "g".into(), topic: "t".into(), partition: 0, value: None },
            OffsetsRecord::Group { group: "g".into(), value: None },
        ];
        let bytes = encode_batch(&recs, 5).unwrap().freeze();
        let back = decode_batches(&bytes).unwrap();
        assert_eq!(back.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(back.into_iter().map(|r| r.record.unwrap()).collect::<Vec<_>>(), recs);
        assert!(decode_batches(&Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 40, 1])).is_err());
    }

    #[test]
    fn malformed_records_are_rejected_not_panicked_on() {
        assert_eq!(OffsetsRecord::decode(&[], None), None);
        assert_eq!(OffsetsRecord::decode(&[0, 1, 0x7f, 0xff], None), None);
        assert_eq!(OffsetsRecord::decode(&[0, 9], None), None);
        let key = OffsetsRecord::Group { group: "g".into(), value: None }.key();
        assert_eq!(OffsetsRecord::decode(&key, Some(&[0, 3, 0, 200])), None);
    }
}
