//! Structural pre-validation of request frames, run before kafka-protocol's decoder.
//!
//! kafka-protocol 0.18 sizes a `Vec` from a wire-supplied array count before it checks
//! that the elements exist, so a four-byte body claiming 2^31 elements aborts the process.
//! [`check_request`] walks the frame against a table of Kafka's request layouts and
//! rejects it if any length or count claims more than the frame holds.
//!
//! Invariant: if `check_request(frame)` is `Ok`, decoding the header and body of `frame`
//! with kafka-protocol reads exactly the structure the guard walked, so every count the
//! decoder allocates for is at most the number of bytes left in the frame (every element
//! takes at least one byte). Trailing bytes after the body are allowed, as the decoder
//! allows them.
//!
//! Wire rules the walker follows:
//!
//! * Non-flexible versions: strings are an `i16` length, bytes and arrays an `i32` length;
//!   `-1` is null.
//! * Flexible versions: strings, bytes and arrays are an unsigned varint holding length
//!   plus one (`0` is null), and every struct, the top level included, ends with tagged
//!   fields: a varint count, then per field a varint tag, a varint size and `size` bytes.
//! * A tagged field the decoder knows is decoded from the main buffer, not from its
//!   `size` bytes; the guard walks its content and requires it to be exactly `size`
//!   bytes, so that guard and decoder stay at the same position.
//!
//! The layouts follow Apache Kafka's `clients/src/main/resources/common/message/*Request.json`
//! for the versions kafka-protocol 0.18 decodes; the tests prove them against the crate by
//! round trip for every API and version.

use kafka_protocol::messages::ApiKey;
use thiserror::Error;

/// Why a request frame was refused before decoding.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GuardError {
    /// The frame ends before the API key and version.
    #[error("request frame of {0} bytes is too short for a request header")]
    TooShort(usize),
    /// An API key this broker does not decode.
    #[error("unknown or unsupported api key {0}")]
    UnknownApi(i16),
    /// A version of a known API that the decoder does not support; for ApiVersions the
    /// caller answers with an ApiVersions v0 response. The correlation id is still at
    /// `frame[4..8]`, as in every header version.
    #[error("api key {api_key} does not support version {version}")]
    UnsupportedVersion { api_key: i16, version: i16 },
    /// The frame does not match the layout of the request it names.
    #[error("malformed request (api key {api_key} v{version}): {reason}")]
    Malformed {
        api_key: i16,
        version: i16,
        reason: String,
    },
}

/// Checks that `frame` (a request without its 4-byte size prefix) is a structurally
/// complete request whose lengths all fit inside the frame.
pub fn check_request(frame: &[u8]) -> Result<(), GuardError> {
    if frame.len() < 4 {
        return Err(GuardError::TooShort(frame.len()));
    }
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api = find_api(api_key).ok_or(GuardError::UnknownApi(api_key))?;
    if version < api.min || version > api.max {
        return Err(GuardError::UnsupportedVersion { api_key, version });
    }
    let header_version = ApiKey::try_from(api_key)
        .map_err(|()| GuardError::UnknownApi(api_key))?
        .request_header_version(version);
    let malformed = |reason: String| GuardError::Malformed {
        api_key,
        version,
        reason,
    };
    let mut cursor = Cursor { buf: frame, pos: 4 };
    walk_header(&mut cursor, header_version).map_err(|e| malformed(format!("header: {e}")))?;
    let flexible = version >= api.flexible_from;
    walk_layout(&mut cursor, api.body, version, flexible).map_err(malformed)
}

/// The API keys and version ranges the guard can validate.
pub fn supported_apis() -> impl Iterator<Item = (i16, std::ops::RangeInclusive<i16>)> {
    APIS.iter().map(|api| (api.key, api.min..=api.max))
}

/// Header after api key and version: correlation id, client id (always an `i16`-length
/// nullable string), and in header v2 tagged fields.
fn walk_header(cursor: &mut Cursor<'_>, header_version: i16) -> Result<(), String> {
    cursor.skip(4).map_err(|e| format!("correlation_id: {e}"))?;
    if header_version >= 1 {
        walk_value(cursor, Ty::NStr, header_version, false)
            .map_err(|e| format!("client_id: {e}"))?;
    }
    if header_version >= 2 {
        walk_tagged_fields(cursor, &[], header_version)?;
    }
    Ok(())
}

fn find_api(key: i16) -> Option<&'static Api> {
    APIS.iter().copied().find(|api| api.key == key)
}

// ---------------------------------------------------------------------------------------
// Layout description
// ---------------------------------------------------------------------------------------

/// A request API: its versions, the first flexible version, and the top-level layout.
struct Api {
    key: i16,
    min: i16,
    max: i16,
    flexible_from: i16,
    body: &'static Layout,
}

/// The fields of one struct, in wire order, and the tagged fields it knows.
struct Layout {
    fields: &'static [Field],
    tags: &'static [Tagged],
}

/// A field present in versions `min..=max`.
struct Field {
    name: &'static str,
    ty: Ty,
    min: i16,
    max: i16,
}

/// A tagged field the decoder reads from the main buffer in versions `min..=max`.
struct Tagged {
    tag: u32,
    name: &'static str,
    ty: Ty,
    min: i16,
    max: i16,
}

#[derive(Clone, Copy)]
enum Ty {
    /// Fixed width: int8/16/32/64, uint16, float64 (1, 2, 4, 8, 2, 8) and uuid (16).
    Fixed(usize),
    Bool,
    Str,
    NStr,
    Bytes,
    /// Record batches: nullable bytes on the wire (the only nullable bytes in these
    /// requests), decoded later by storage, not by the guard.
    Records,
    /// Array of fixed-width elements of the given width.
    Prims(usize),
    /// Array of non-null strings.
    Strs,
    /// Nullable array of non-null strings.
    NStrs,
    Array(&'static Layout),
    NArray(&'static Layout),
    /// A nested struct, always present. (Kafka's nullable structs, an `i8` marker then
    /// the struct, appear in none of these requests.)
    One(&'static Layout),
}

const I8: Ty = Ty::Fixed(1);
const I16: Ty = Ty::Fixed(2);
const I32: Ty = Ty::Fixed(4);
const I64: Ty = Ty::Fixed(8);
const UUID: Ty = Ty::Fixed(16);
/// No flexible version.
const NEVER: i16 = i16::MAX;

const fn f(name: &'static str, ty: Ty, min: i16, max: i16) -> Field {
    Field { name, ty, min, max }
}

const fn t(tag: u32, name: &'static str, ty: Ty, min: i16, max: i16) -> Tagged {
    Tagged {
        tag,
        name,
        ty,
        min,
        max,
    }
}

const fn prims(element: Ty) -> Ty {
    match element {
        Ty::Fixed(width) => Ty::Prims(width),
        _ => panic!("prims() takes a fixed-width type"),
    }
}

// ---------------------------------------------------------------------------------------
// Walker
// ---------------------------------------------------------------------------------------

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn skip(&mut self, n: usize) -> Result<(), String> {
        if n > self.remaining() {
            return Err(format!("needs {n} bytes, {} remain", self.remaining()));
        }
        self.pos += n;
        Ok(())
    }

    fn read<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let start = self.pos;
        self.skip(N)?;
        let mut out = [0; N];
        out.copy_from_slice(&self.buf[start..self.pos]);
        Ok(out)
    }

    /// Unsigned varint exactly as kafka-protocol reads it: at most five bytes, high bits
    /// of the fifth byte dropped, no error for a fifth continuation bit.
    fn uvarint(&mut self) -> Result<u32, String> {
        let mut value = 0u32;
        for i in 0..5 {
            let [b] = self.read::<1>()?;
            value |= u32::from(b & 0x7f).wrapping_shl(i * 7);
            if b < 0x80 {
                break;
            }
        }
        Ok(value)
    }

    /// A length prefix: `None` for null. `wide` picks `i32` over `i16` in non-flexible
    /// versions.
    fn length(&mut self, flexible: bool, wide: bool) -> Result<Option<usize>, String> {
        if flexible {
            return Ok(match self.uvarint()? {
                0 => None,
                n => Some(n as usize - 1),
            });
        }
        let n = if wide {
            i32::from_be_bytes(self.read()?)
        } else {
            i32::from(i16::from_be_bytes(self.read()?))
        };
        match n {
            -1 => Ok(None),
            n if n >= 0 => Ok(Some(n as usize)),
            n => Err(format!("negative length {n}")),
        }
    }

    /// An array count, bounded by the bytes left at `min_element` bytes per element.
    fn count(
        &mut self,
        flexible: bool,
        nullable: bool,
        min_element: usize,
    ) -> Result<usize, String> {
        match self.length(flexible, true)? {
            None if nullable => Ok(0),
            None => Err("null array where none is allowed".to_owned()),
            Some(n) if n.saturating_mul(min_element) > self.remaining() => Err(format!(
                "array of {n} elements but {} bytes remain",
                self.remaining()
            )),
            Some(n) => Ok(n),
        }
    }

    /// A string or bytes length; the bytes are skipped.
    fn skip_sized(&mut self, flexible: bool, wide: bool, nullable: bool) -> Result<(), String> {
        match self.length(flexible, wide)? {
            None if nullable => Ok(()),
            None => Err("null where none is allowed".to_owned()),
            Some(n) => self.skip(n),
        }
    }
}

fn walk_layout(
    cursor: &mut Cursor<'_>,
    layout: &Layout,
    version: i16,
    flexible: bool,
) -> Result<(), String> {
    for field in layout.fields {
        if (field.min..=field.max).contains(&version) {
            walk_value(cursor, field.ty, version, flexible)
                .map_err(|e| format!("{}: {e}", field.name))?;
        }
    }
    if flexible {
        walk_tagged_fields(cursor, layout.tags, version)?;
    }
    Ok(())
}

fn walk_value(cursor: &mut Cursor<'_>, ty: Ty, version: i16, flexible: bool) -> Result<(), String> {
    match ty {
        Ty::Fixed(width) => cursor.skip(width),
        Ty::Bool => cursor.skip(1),
        Ty::Str => cursor.skip_sized(flexible, false, false),
        Ty::NStr => cursor.skip_sized(flexible, false, true),
        Ty::Bytes => cursor.skip_sized(flexible, true, false),
        Ty::Records => cursor.skip_sized(flexible, true, true),
        Ty::Prims(width) => {
            let n = cursor.count(flexible, false, width)?;
            cursor.skip(n * width)
        }
        Ty::Strs | Ty::NStrs => {
            let n = cursor.count(flexible, matches!(ty, Ty::NStrs), 1)?;
            (0..n).try_for_each(|_| cursor.skip_sized(flexible, false, false))
        }
        Ty::Array(layout) | Ty::NArray(layout) => {
            let nullable = matches!(ty, Ty::NArray(_));
            let n = cursor.count(flexible, nullable, 1)?;
            (0..n).try_for_each(|_| walk_layout(cursor, layout, version, flexible))
        }
        Ty::One(layout) => walk_layout(cursor, layout, version, flexible),
    }
}

fn walk_tagged_fields(
    cursor: &mut Cursor<'_>,
    known: &[Tagged],
    version: i16,
) -> Result<(), String> {
    let count = cursor.uvarint()? as usize;
    // Each tagged field takes at least two bytes (tag and size).
    if count.saturating_mul(2) > cursor.remaining() {
        return Err(format!(
            "{count} tagged fields but {} bytes remain",
            cursor.remaining()
        ));
    }
    for _ in 0..count {
        let tag = cursor.uvarint()?;
        let size = cursor.uvarint()? as usize;
        if size > cursor.remaining() {
            return Err(format!(
                "tagged field {tag} of {size} bytes but {} remain",
                cursor.remaining()
            ));
        }
        match known.iter().find(|k| k.tag == tag) {
            Some(k) if (k.min..=k.max).contains(&version) => {
                let start = cursor.pos;
                walk_value(cursor, k.ty, version, true).map_err(|e| format!("{}: {e}", k.name))?;
                let walked = cursor.pos - start;
                if walked != size {
                    return Err(format!(
                        "{}: tagged size {size} but content is {walked} bytes",
                        k.name
                    ));
                }
            }
            Some(k) => {
                return Err(format!(
                    "tag {tag} ({}) is not valid in this version",
                    k.name
                ))
            }
            None => cursor.skip(size)?,
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Request layouts, one module per API (versions as kafka-protocol 0.18 decodes them)
// ---------------------------------------------------------------------------------------

static APIS: &[&Api] = &[
    &layouts::produce::API,
    &layouts::fetch::API,
    &layouts::list_offsets::API,
    &layouts::metadata::API,
    &layouts::offset_commit::API,
    &layouts::offset_fetch::API,
    &layouts::find_coordinator::API,
    &layouts::join_group::API,
    &layouts::heartbeat::API,
    &layouts::leave_group::API,
    &layouts::sync_group::API,
    &layouts::describe_groups::API,
    &layouts::list_groups::API,
    &layouts::sasl_handshake::API,
    &layouts::api_versions::API,
    &layouts::create_topics::API,
    &layouts::delete_topics::API,
    &layouts::delete_records::API,
    &layouts::init_producer_id::API,
    &layouts::offset_for_leader_epoch::API,
    &layouts::add_partitions_to_txn::API,
    &layouts::add_offsets_to_txn::API,
    &layouts::end_txn::API,
    &layouts::txn_offset_commit::API,
    &layouts::describe_configs::API,
    &layouts::alter_configs::API,
    &layouts::describe_log_dirs::API,
    &layouts::sasl_authenticate::API,
    &layouts::create_partitions::API,
    &layouts::delete_groups::API,
    &layouts::incremental_alter_configs::API,
    &layouts::offset_delete::API,
    &layouts::describe_cluster::API,
    &layouts::describe_producers::API,
    &layouts::describe_transactions::API,
    &layouts::list_transactions::API,
    &layouts::consumer_group_heartbeat::API,
    &layouts::consumer_group_describe::API,
];

mod layouts {
    use super::{f, prims, t, Api, Layout, Ty::*, I16, I32, I64, I8, NEVER, UUID};

    pub mod produce {
        use super::*;
        pub static API: Api = Api {
            key: 0,
            min: 3,
            max: 13,
            flexible_from: 9,
            body: &PRODUCE_REQUEST,
        };
        static PRODUCE_REQUEST: Layout = Layout {
            fields: &[
                f("transactional_id", NStr, 3, 13),
                f("acks", I16, 3, 13),
                f("timeout_ms", I32, 3, 13),
                f("topic_data", Array(&TOPIC_PRODUCE_DATA), 3, 13),
            ],
            tags: &[],
        };
        static TOPIC_PRODUCE_DATA: Layout = Layout {
            fields: &[
                f("name", Str, 3, 12),
                f("topic_id", UUID, 13, 13),
                f("partition_data", Array(&PARTITION_PRODUCE_DATA), 3, 13),
            ],
            tags: &[],
        };
        static PARTITION_PRODUCE_DATA: Layout = Layout {
            fields: &[f("index", I32, 3, 13), f("records", Records, 3, 13)],
            tags: &[],
        };
    }
    pub mod fetch {
        use super::*;
        pub static API: Api = Api {
            key: 1,
            min: 4,
            max: 18,
            flexible_from: 12,
            body: &FETCH_REQUEST,
        };
        static FETCH_REQUEST: Layout = Layout {
            fields: &[
                f("replica_id", I32, 4, 14),
                f("max_wait_ms", I32, 4, 18),
                f("min_bytes", I32, 4, 18),
                f("max_bytes", I32, 4, 18),
                f("isolation_level", I8, 4, 18),
                f("session_id", I32, 7, 18),
                f("session_epoch", I32, 7, 18),
                f("topics", Array(&FETCH_TOPIC), 4, 18),
                f("forgotten_topics_data", Array(&FORGOTTEN_TOPIC), 7, 18),
                f("rack_id", Str, 11, 18),
            ],
            tags: &[
                t(0, "cluster_id", NStr, 12, 18),
                t(1, "replica_state", One(&REPLICA_STATE), 15, 18),
            ],
        };
        static FETCH_TOPIC: Layout = Layout {
            fields: &[
                f("topic", Str, 4, 12),
                f("topic_id", UUID, 13, 18),
                f("partitions", Array(&FETCH_PARTITION), 4, 18),
            ],
            tags: &[],
        };
        static FORGOTTEN_TOPIC: Layout = Layout {
            fields: &[
                f("topic", Str, 7, 12),
                f("topic_id", UUID, 13, 18),
                f("partitions", prims(I32), 7, 18),
            ],
            tags: &[],
        };
        static REPLICA_STATE: Layout = Layout {
            fields: &[
                f("replica_id", I32, 15, 18),
                f("replica_epoch", I64, 15, 18),
            ],
            tags: &[],
        };
        static FETCH_PARTITION: Layout = Layout {
            fields: &[
                f("partition", I32, 4, 18),
                f("current_leader_epoch", I32, 9, 18),
                f("fetch_offset", I64, 4, 18),
                f("last_fetched_epoch", I32, 12, 18),
                f("log_start_offset", I64, 5, 18),
                f("partition_max_bytes", I32, 4, 18),
            ],
            tags: &[
                t(0, "replica_directory_id", UUID, 17, 18),
                t(1, "high_watermark", I64, 18, 18),
            ],
        };
    }
    pub mod list_offsets {
        use super::*;
        pub static API: Api = Api {
            key: 2,
            min: 1,
            max: 10,
            flexible_from: 6,
            body: &LIST_OFFSETS_REQUEST,
        };
        static LIST_OFFSETS_REQUEST: Layout = Layout {
            fields: &[
                f("replica_id", I32, 1, 10),
                f("isolation_level", I8, 2, 10),
                f("topics", Array(&LIST_OFFSETS_TOPIC), 1, 10),
                f("timeout_ms", I32, 10, 10),
            ],
            tags: &[],
        };
        static LIST_OFFSETS_TOPIC: Layout = Layout {
            fields: &[
                f("name", Str, 1, 10),
                f("partitions", Array(&LIST_OFFSETS_PARTITION), 1, 10),
            ],
            tags: &[],
        };
        static LIST_OFFSETS_PARTITION: Layout = Layout {
            fields: &[
                f("partition_index", I32, 1, 10),
                f("current_leader_epoch", I32, 4, 10),
                f("timestamp", I64, 1, 10),
            ],
            tags: &[],
        };
    }
    pub mod metadata {
        use super::*;
        pub static API: Api = Api {
            key: 3,
            min: 0,
            max: 13,
            flexible_from: 9,
            body: &METADATA_REQUEST,
        };
        static METADATA_REQUEST: Layout = Layout {
            fields: &[
                f("topics", NArray(&METADATA_REQUEST_TOPIC), 0, 13),
                f("allow_auto_topic_creation", Bool, 4, 13),
                f("include_cluster_authorized_operations", Bool, 8, 10),
                f("include_topic_authorized_operations", Bool, 8, 13),
            ],
            tags: &[],
        };
        static METADATA_REQUEST_TOPIC: Layout = Layout {
            fields: &[f("topic_id", UUID, 10, 13), f("name", NStr, 0, 13)],
            tags: &[],
        };
    }
    pub mod offset_commit {
        use super::*;
        pub static API: Api = Api {
            key: 8,
            min: 2,
            max: 9,
            flexible_from: 8,
            body: &OFFSET_COMMIT_REQUEST,
        };
        static OFFSET_COMMIT_REQUEST: Layout = Layout {
            fields: &[
                f("group_id", Str, 2, 9),
                f("generation_id_or_member_epoch", I32, 2, 9),
                f("member_id", Str, 2, 9),
                f("group_instance_id", NStr, 7, 9),
                f("retention_time_ms", I64, 2, 4),
                f("topics", Array(&OFFSET_COMMIT_REQUEST_TOPIC), 2, 9),
            ],
            tags: &[],
        };
        static OFFSET_COMMIT_REQUEST_TOPIC: Layout = Layout {
            fields: &[
                f("name", Str, 2, 9),
                f("partitions", Array(&OFFSET_COMMIT_REQUEST_PARTITION), 2, 9),
            ],
            tags: &[],
        };
        static OFFSET_COMMIT_REQUEST_PARTITION: Layout = Layout {
            fields: &[
                f("partition_index", I32, 2, 9),
                f("committed_offset", I64, 2, 9),
                f("committed_leader_epoch", I32, 6, 9),
                f("committed_metadata", NStr, 2, 9),
            ],
            tags: &[],
        };
    }
    pub mod offset_fetch {
        use super::*;
        pub static API: Api = Api {
            key: 9,
            min: 1,
            max: 9,
            flexible_from: 6,
            body: &OFFSET_FETCH_REQUEST,
        };
        static OFFSET_FETCH_REQUEST: Layout = Layout {
            fields: &[
                f("group_id", Str, 1, 7),
                f("topics", NArray(&OFFSET_FETCH_REQUEST_TOPIC), 1, 7),
                f("groups", Array(&OFFSET_FETCH_REQUEST_GROUP), 8, 9),
                f("require_stable", Bool, 7, 9),
            ],
            tags: &[],
        };
        static OFFSET_FETCH_REQUEST_TOPIC: Layout = Layout {
            fields: &[
                f("name", Str, 1, 7),
                f("partition_indexes", prims(I32), 1, 7),
            ],
            tags: &[],
        };
        static OFFSET_FETCH_REQUEST_GROUP: Layout = Layout {
            fields: &[
                f("group_id", Str, 8, 9),
                f("member_id", NStr, 9, 9),
                f("member_epoch", I32, 9, 9),
                f("topics", NArray(&OFFSET_FETCH_REQUEST_TOPICS), 8, 9),
            ],
            tags: &[],
        };
        static OFFSET_FETCH_REQUEST_TOPICS: Layout = Layout {
            fields: &[
                f("name", Str, 8, 9),
                f("partition_indexes", prims(I32), 8, 9),
            ],
            tags: &[],
        };
    }
    pub mod find_coordinator {
        use super::*;
        pub static API: Api = Api {
            key: 10,
            min: 0,
            max: 6,
            flexible_from: 3,
            body: &FIND_COORDINATOR_REQUEST,
        };
        static FIND_COORDINATOR_REQUEST: Layout = Layout {
            fields: &[
                f("key", Str, 0, 3),
                f("key_type", I8, 1, 6),
                f("coordinator_keys", Strs, 4, 6),
            ],
            tags: &[],
        };
    }
    pub mod join_group {
        use super::*;
        pub static API: Api = Api {
            key: 11,
            min: 0,
            max: 9,
            flexible_from: 6,
            body: &JOIN_GROUP_REQUEST,
        };
        static JOIN_GROUP_REQUEST: Layout = Layout {
            fields: &[
                f("group_id", Str, 0, 9),
                f("session_timeout_ms", I32, 0, 9),
                f("rebalance_timeout_ms", I32, 1, 9),
                f("member_id", Str, 0, 9),
                f("group_instance_id", NStr, 5, 9),
                f("protocol_type", Str, 0, 9),
                f("protocols", Array(&JOIN_GROUP_REQUEST_PROTOCOL), 0, 9),
                f("reason", NStr, 8, 9),
            ],
            tags: &[],
        };
        static JOIN_GROUP_REQUEST_PROTOCOL: Layout = Layout {
            fields: &[f("name", Str, 0, 9), f("metadata", Bytes, 0, 9)],
            tags: &[],
        };
    }
    pub mod heartbeat {
        use super::*;
        pub static API: Api = Api {
            key: 12,
            min: 0,
            max: 4,
            flexible_from: 4,
            body: &HEARTBEAT_REQUEST,
        };
        static HEARTBEAT_REQUEST: Layout = Layout {
            fields: &[
                f("group_id", Str, 0, 4),
                f("generation_id", I32, 0, 4),
                f("member_id", Str, 0, 4),
                f("group_instance_id", NStr, 3, 4),
            ],
            tags: &[],
        };
    }
    pub mod leave_group {
        use super::*;
        pub static API: Api = Api {
            key: 13,
            min: 0,
            max: 5,
            flexible_from: 4,
            body: &LEAVE_GROUP_REQUEST,
        };
        static LEAVE_GROUP_REQUEST: Layout = Layout {
            fields: &[
                f("group_id", Str, 0, 5),
                f("member_id", Str, 0, 2),
                f("members", Array(&MEMBER_IDENTITY), 3, 5),
            ],
            tags: &[],
        };
        static MEMBER_IDENTITY: Layout = Layout {
            fields: &[
                f("member_id", Str, 3, 5),
                f("group_instance_id", NStr, 3, 5),
                f("reason", NStr, 5, 5),
            ],
            tags: &[],
        };
    }
    pub mod sync_group {
        use super::*;
        pub static API: Api = Api {
            key: 14,
            min: 0,
            max: 5,
            flexible_from: 4,
            body: &SYNC_GROUP_REQUEST,
        };
        static SYNC_GROUP_REQUEST: Layout = Layout {
            fields: &[
                f("group_id", Str, 0, 5),
                f("generation_id", I32, 0, 5),
                f("member_id", Str, 0, 5),
                f("group_instance_id", NStr, 3, 5),
                f("protocol_type", NStr, 5, 5),
                f("protocol_name", NStr, 5, 5),
                f("assignments", Array(&SYNC_GROUP_REQUEST_ASSIGNMENT), 0, 5),
            ],
            tags: &[],
        };
        static SYNC_GROUP_REQUEST_ASSIGNMENT: Layout = Layout {
            fields: &[f("member_id", Str, 0, 5), f("assignment", Bytes, 0, 5)],
            tags: &[],
        };
    }
    pub mod describe_groups {
        use super::*;
        pub static API: Api = Api {
            key: 15,
            min: 0,
            max: 6,
            flexible_from: 5,
            body: &DESCRIBE_GROUPS_REQUEST,
        };
        static DESCRIBE_GROUPS_REQUEST: Layout = Layout {
            fields: &[
                f("groups", Strs, 0, 6),
                f("include_authorized_operations", Bool, 3, 6),
            ],
            tags: &[],
        };
    }
    pub mod list_groups {
        use super::*;
        pub static API: Api = Api {
            key: 16,
            min: 0,
            max: 5,
            flexible_from: 3,
            body: &LIST_GROUPS_REQUEST,
        };
        static LIST_GROUPS_REQUEST: Layout = Layout {
            fields: &[
                f("states_filter", Strs, 4, 5),
                f("types_filter", Strs, 5, 5),
            ],
            tags: &[],
        };
    }
    pub mod sasl_handshake {
        use super::*;
        pub static API: Api = Api {
            key: 17,
            min: 0,
            max: 1,
            flexible_from: NEVER,
            body: &SASL_HANDSHAKE_REQUEST,
        };
        static SASL_HANDSHAKE_REQUEST: Layout = Layout {
            fields: &[f("mechanism", Str, 0, 1)],
            tags: &[],
        };
    }
    pub mod api_versions {
        use super::*;
        pub static API: Api = Api {
            key: 18,
            min: 0,
            max: 4,
            flexible_from: 3,
            body: &API_VERSIONS_REQUEST,
        };
        static API_VERSIONS_REQUEST: Layout = Layout {
            fields: &[
                f("client_software_name", Str, 3, 4),
                f("client_software_version", Str, 3, 4),
            ],
            tags: &[],
        };
    }
    pub mod create_topics {
        use super::*;
        pub static API: Api = Api {
            key: 19,
            min: 2,
            max: 7,
            flexible_from: 5,
            body: &CREATE_TOPICS_REQUEST,
        };
        static CREATE_TOPICS_REQUEST: Layout = Layout {
            fields: &[
                f("topics", Array(&CREATABLE_TOPIC), 2, 7),
                f("timeout_ms", I32, 2, 7),
                f("validate_only", Bool, 2, 7),
            ],
            tags: &[],
        };
        static CREATABLE_TOPIC: Layout = Layout {
            fields: &[
                f("name", Str, 2, 7),
                f("num_partitions", I32, 2, 7),
                f("replication_factor", I16, 2, 7),
                f("assignments", Array(&CREATABLE_REPLICA_ASSIGNMENT), 2, 7),
                f("configs", Array(&CREATABLE_TOPIC_CONFIG), 2, 7),
            ],
            tags: &[],
        };
        static CREATABLE_REPLICA_ASSIGNMENT: Layout = Layout {
            fields: &[
                f("partition_index", I32, 2, 7),
                f("broker_ids", prims(I32), 2, 7),
            ],
            tags: &[],
        };
        static CREATABLE_TOPIC_CONFIG: Layout = Layout {
            fields: &[f("name", Str, 2, 7), f("value", NStr, 2, 7)],
            tags: &[],
        };
    }
    pub mod delete_topics {
        use super::*;
        pub static API: Api = Api {
            key: 20,
            min: 1,
            max: 6,
            flexible_from: 4,
            body: &DELETE_TOPICS_REQUEST,
        };
        static DELETE_TOPICS_REQUEST: Layout = Layout {
            fields: &[
                f("topics", Array(&DELETE_TOPIC_STATE), 6, 6),
                f("topic_names", Strs, 1, 5),
                f("timeout_ms", I32, 1, 6),
            ],
            tags: &[],
        };
        static DELETE_TOPIC_STATE: Layout = Layout {
            fields: &[f("name", NStr, 6, 6), f("topic_id", UUID, 6, 6)],
            tags: &[],
        };
    }
    pub mod delete_records {
        use super::*;
        pub static API: Api = Api {
            key: 21,
            min: 0,
            max: 2,
            flexible_from: 2,
            body: &DELETE_RECORDS_REQUEST,
        };
        static DELETE_RECORDS_REQUEST: Layout = Layout {
            fields: &[
                f("topics", Array(&DELETE_RECORDS_TOPIC), 0, 2),
                f("timeout_ms", I32, 0, 2),
            ],
            tags: &[],
        };
        static DELETE_RECORDS_TOPIC: Layout = Layout {
            fields: &[
                f("name", Str, 0, 2),
                f("partitions", Array(&DELETE_RECORDS_PARTITION), 0, 2),
            ],
            tags: &[],
        };
        static DELETE_RECORDS_PARTITION: Layout = Layout {
            fields: &[f("partition_index", I32, 0, 2), f("offset", I64, 0, 2)],
            tags: &[],
        };
    }
    pub mod init_producer_id {
        use super::*;
        pub static API: Api = Api {
            key: 22,
            min: 0,
            max: 5,
            flexible_from: 2,
            body: &INIT_PRODUCER_ID_REQUEST,
        };
        static INIT_PRODUCER_ID_REQUEST: Layout = Layout {
            fields: &[
                f("transactional_id", NStr, 0, 5),
                f("transaction_timeout_ms", I32, 0, 5),
                f("producer_id", I64, 3, 5),
                f("producer_epoch", I16, 3, 5),
            ],
            tags: &[],
        };
    }
    pub mod offset_for_leader_epoch {
        use super::*;
        pub static API: Api = Api {
            key: 23,
            min: 2,
            max: 4,
            flexible_from: 4,
            body: &OFFSET_FOR_LEADER_EPOCH_REQUEST,
        };
        static OFFSET_FOR_LEADER_EPOCH_REQUEST: Layout = Layout {
            fields: &[
                f("replica_id", I32, 3, 4),
                f("topics", Array(&OFFSET_FOR_LEADER_TOPIC), 2, 4),
            ],
            tags: &[],
        };
        static OFFSET_FOR_LEADER_TOPIC: Layout = Layout {
            fields: &[
                f("topic", Str, 2, 4),
                f("partitions", Array(&OFFSET_FOR_LEADER_PARTITION), 2, 4),
            ],
            tags: &[],
        };
        static OFFSET_FOR_LEADER_PARTITION: Layout = Layout {
            fields: &[
                f("partition", I32, 2, 4),
                f("current_leader_epoch", I32, 2, 4),
                f("leader_epoch", I32, 2, 4),
            ],
            tags: &[],
        };
    }
    pub mod add_partitions_to_txn {
        use super::*;
        pub static API: Api = Api {
            key: 24,
            min: 0,
            max: 5,
            flexible_from: 3,
            body: &ADD_PARTITIONS_TO_TXN_REQUEST,
        };
        static ADD_PARTITIONS_TO_TXN_REQUEST: Layout = Layout {
            fields: &[
                f(
                    "transactions",
                    Array(&ADD_PARTITIONS_TO_TXN_TRANSACTION),
                    4,
                    5,
                ),
                f("v3_and_below_transactional_id", Str, 0, 3),
                f("v3_and_below_producer_id", I64, 0, 3),
                f("v3_and_below_producer_epoch", I16, 0, 3),
                f(
                    "v3_and_below_topics",
                    Array(&ADD_PARTITIONS_TO_TXN_TOPIC),
                    0,
                    3,
                ),
            ],
            tags: &[],
        };
        static ADD_PARTITIONS_TO_TXN_TOPIC: Layout = Layout {
            fields: &[f("name", Str, 0, 5), f("partitions", prims(I32), 0, 5)],
            tags: &[],
        };
        static ADD_PARTITIONS_TO_TXN_TRANSACTION: Layout = Layout {
            fields: &[
                f("transactional_id", Str, 4, 5),
                f("producer_id", I64, 4, 5),
                f("producer_epoch", I16, 4, 5),
                f("verify_only", Bool, 4, 5),
                f("topics", Array(&ADD_PARTITIONS_TO_TXN_TOPIC), 4, 5),
            ],
            tags: &[],
        };
    }
    pub mod add_offsets_to_txn {
        use super::*;
        pub static API: Api = Api {
            key: 25,
            min: 0,
            max: 4,
            flexible_from: 3,
            body: &ADD_OFFSETS_TO_TXN_REQUEST,
        };
        static ADD_OFFSETS_TO_TXN_REQUEST: Layout = Layout {
            fields: &[
                f("transactional_id", Str, 0, 4),
                f("producer_id", I64, 0, 4),
                f("producer_epoch", I16, 0, 4),
                f("group_id", Str, 0, 4),
            ],
            tags: &[],
        };
    }
    pub mod end_txn {
        use super::*;
        pub static API: Api = Api {
            key: 26,
            min: 0,
            max: 5,
            flexible_from: 3,
            body: &END_TXN_REQUEST,
        };
        static END_TXN_REQUEST: Layout = Layout {
            fields: &[
                f("transactional_id", Str, 0, 5),
                f("producer_id", I64, 0, 5),
                f("producer_epoch", I16, 0, 5),
                f("committed", Bool, 0, 5),
            ],
            tags: &[],
        };
    }
    pub mod txn_offset_commit {
        use super::*;
        pub static API: Api = Api {
            key: 28,
            min: 0,
            max: 5,
            flexible_from: 3,
            body: &TXN_OFFSET_COMMIT_REQUEST,
        };
        static TXN_OFFSET_COMMIT_REQUEST: Layout = Layout {
            fields: &[
                f("transactional_id", Str, 0, 5),
                f("group_id", Str, 0, 5),
                f("producer_id", I64, 0, 5),
                f("producer_epoch", I16, 0, 5),
                f("generation_id", I32, 3, 5),
                f("member_id", Str, 3, 5),
                f("group_instance_id", NStr, 3, 5),
                f("topics", Array(&TXN_OFFSET_COMMIT_REQUEST_TOPIC), 0, 5),
            ],
            tags: &[],
        };
        static TXN_OFFSET_COMMIT_REQUEST_TOPIC: Layout = Layout {
            fields: &[
                f("name", Str, 0, 5),
                f(
                    "partitions",
                    Array(&TXN_OFFSET_COMMIT_REQUEST_PARTITION),
                    0,
                    5,
                ),
            ],
            tags: &[],
        };
        static TXN_OFFSET_COMMIT_REQUEST_PARTITION: Layout = Layout {
            fields: &[
                f("partition_index", I32, 0, 5),
                f("committed_offset", I64, 0, 5),
                f("committed_leader_epoch", I32, 2, 5),
                f("committed_metadata", NStr, 0, 5),
            ],
            tags: &[],
        };
    }
    pub mod describe_configs {
        use super::*;
        pub static API: Api = Api {
            key: 32,
            min: 1,
            max: 4,
            flexible_from: 4,
            body: &DESCRIBE_CONFIGS_REQUEST,
        };
        static DESCRIBE_CONFIGS_REQUEST: Layout = Layout {
            fields: &[
                f("resources", Array(&DESCRIBE_CONFIGS_RESOURCE), 1, 4),
                f("include_synonyms", Bool, 1, 4),
                f("include_documentation", Bool, 3, 4),
            ],
            tags: &[],
        };
        static DESCRIBE_CONFIGS_RESOURCE: Layout = Layout {
            fields: &[
                f("resource_type", I8, 1, 4),
                f("resource_name", Str, 1, 4),
                f("configuration_keys", NStrs, 1, 4),
            ],
            tags: &[],
        };
    }
    pub mod alter_configs {
        use super::*;
        pub static API: Api = Api {
            key: 33,
            min: 0,
            max: 2,
            flexible_from: 2,
            body: &ALTER_CONFIGS_REQUEST,
        };
        static ALTER_CONFIGS_REQUEST: Layout = Layout {
            fields: &[
                f("resources", Array(&ALTER_CONFIGS_RESOURCE), 0, 2),
                f("validate_only", Bool, 0, 2),
            ],
            tags: &[],
        };
        static ALTER_CONFIGS_RESOURCE: Layout = Layout {
            fields: &[
                f("resource_type", I8, 0, 2),
                f("resource_name", Str, 0, 2),
                f("configs", Array(&ALTERABLE_CONFIG), 0, 2),
            ],
            tags: &[],
        };
        static ALTERABLE_CONFIG: Layout = Layout {
            fields: &[f("name", Str, 0, 2), f("value", NStr, 0, 2)],
            tags: &[],
        };
    }
    pub mod describe_log_dirs {
        use super::*;
        pub static API: Api = Api {
            key: 35,
            min: 1,
            max: 4,
            flexible_from: 2,
            body: &DESCRIBE_LOG_DIRS_REQUEST,
        };
        static DESCRIBE_LOG_DIRS_REQUEST: Layout = Layout {
            fields: &[f("topics", NArray(&DESCRIBABLE_LOG_DIR_TOPIC), 1, 4)],
            tags: &[],
        };
        static DESCRIBABLE_LOG_DIR_TOPIC: Layout = Layout {
            fields: &[f("topic", Str, 1, 4), f("partitions", prims(I32), 1, 4)],
            tags: &[],
        };
    }
    pub mod sasl_authenticate {
        use super::*;
        pub static API: Api = Api {
            key: 36,
            min: 0,
            max: 2,
            flexible_from: 2,
            body: &SASL_AUTHENTICATE_REQUEST,
        };
        static SASL_AUTHENTICATE_REQUEST: Layout = Layout {
            fields: &[f("auth_bytes", Bytes, 0, 2)],
            tags: &[],
        };
    }
    pub mod create_partitions {
        use super::*;
        pub static API: Api = Api {
            key: 37,
            min: 0,
            max: 3,
            flexible_from: 2,
            body: &CREATE_PARTITIONS_REQUEST,
        };
        static CREATE_PARTITIONS_REQUEST: Layout = Layout {
            fields: &[
                f("topics", Array(&CREATE_PARTITIONS_TOPIC), 0, 3),
                f("timeout_ms", I32, 0, 3),
                f("validate_only", Bool, 0, 3),
            ],
            tags: &[],
        };
        static CREATE_PARTITIONS_TOPIC: Layout = Layout {
            fields: &[
                f("name", Str, 0, 3),
                f("count", I32, 0, 3),
                f("assignments", NArray(&CREATE_PARTITIONS_ASSIGNMENT), 0, 3),
            ],
            tags: &[],
        };
        static CREATE_PARTITIONS_ASSIGNMENT: Layout = Layout {
            fields: &[f("broker_ids", prims(I32), 0, 3)],
            tags: &[],
        };
    }
    pub mod delete_groups {
        use super::*;
        pub static API: Api = Api {
            key: 42,
            min: 0,
            max: 2,
            flexible_from: 2,
            body: &DELETE_GROUPS_REQUEST,
        };
        static DELETE_GROUPS_REQUEST: Layout = Layout {
            fields: &[f("groups_names", Strs, 0, 2)],
            tags: &[],
        };
    }
    pub mod incremental_alter_configs {
        use super::*;
        pub static API: Api = Api {
            key: 44,
            min: 0,
            max: 1,
            flexible_from: 1,
            body: &INCREMENTAL_ALTER_CONFIGS_REQUEST,
        };
        static INCREMENTAL_ALTER_CONFIGS_REQUEST: Layout = Layout {
            fields: &[
                f("resources", Array(&ALTER_CONFIGS_RESOURCE), 0, 1),
                f("validate_only", Bool, 0, 1),
            ],
            tags: &[],
        };
        static ALTER_CONFIGS_RESOURCE: Layout = Layout {
            fields: &[
                f("resource_type", I8, 0, 1),
                f("resource_name", Str, 0, 1),
                f("configs", Array(&ALTERABLE_CONFIG), 0, 1),
            ],
            tags: &[],
        };
        static ALTERABLE_CONFIG: Layout = Layout {
            fields: &[
                f("name", Str, 0, 1),
                f("config_operation", I8, 0, 1),
                f("value", NStr, 0, 1),
            ],
            tags: &[],
        };
    }
    pub mod offset_delete {
        use super::*;
        pub static API: Api = Api {
            key: 47,
            min: 0,
            max: 0,
            flexible_from: NEVER,
            body: &OFFSET_DELETE_REQUEST,
        };
        static OFFSET_DELETE_REQUEST: Layout = Layout {
            fields: &[
                f("group_id", Str, 0, 0),
                f("topics", Array(&OFFSET_DELETE_REQUEST_TOPIC), 0, 0),
            ],
            tags: &[],
        };
        static OFFSET_DELETE_REQUEST_TOPIC: Layout = Layout {
            fields: &[
                f("name", Str, 0, 0),
                f("partitions", Array(&OFFSET_DELETE_REQUEST_PARTITION), 0, 0),
            ],
            tags: &[],
        };
        static OFFSET_DELETE_REQUEST_PARTITION: Layout = Layout {
            fields: &[f("partition_index", I32, 0, 0)],
            tags: &[],
        };
    }
    pub mod describe_cluster {
        use super::*;
        pub static API: Api = Api {
            key: 60,
            min: 0,
            max: 2,
            flexible_from: 0,
            body: &DESCRIBE_CLUSTER_REQUEST,
        };
        static DESCRIBE_CLUSTER_REQUEST: Layout = Layout {
            fields: &[
                f("include_cluster_authorized_operations", Bool, 0, 2),
                f("endpoint_type", I8, 1, 2),
                f("include_fenced_brokers", Bool, 2, 2),
            ],
            tags: &[],
        };
    }
    pub mod describe_producers {
        use super::*;
        pub static API: Api = Api {
            key: 61,
            min: 0,
            max: 0,
            flexible_from: 0,
            body: &DESCRIBE_PRODUCERS_REQUEST,
        };
        static DESCRIBE_PRODUCERS_REQUEST: Layout = Layout {
            fields: &[f("topics", Array(&TOPIC_REQUEST), 0, 0)],
            tags: &[],
        };
        static TOPIC_REQUEST: Layout = Layout {
            fields: &[
                f("name", Str, 0, 0),
                f("partition_indexes", prims(I32), 0, 0),
            ],
            tags: &[],
        };
    }
    pub mod describe_transactions {
        use super::*;
        pub static API: Api = Api {
            key: 65,
            min: 0,
            max: 0,
            flexible_from: 0,
            body: &DESCRIBE_TRANSACTIONS_REQUEST,
        };
        static DESCRIBE_TRANSACTIONS_REQUEST: Layout = Layout {
            fields: &[f("transactional_ids", Strs, 0, 0)],
            tags: &[],
        };
    }
    pub mod list_transactions {
        use super::*;
        pub static API: Api = Api {
            key: 66,
            min: 0,
            max: 2,
            flexible_from: 0,
            body: &LIST_TRANSACTIONS_REQUEST,
        };
        static LIST_TRANSACTIONS_REQUEST: Layout = Layout {
            fields: &[
                f("state_filters", Strs, 0, 2),
                f("producer_id_filters", prims(I64), 0, 2),
                f("duration_filter", I64, 1, 2),
                f("transactional_id_pattern", NStr, 2, 2),
            ],
            tags: &[],
        };
    }
    pub mod consumer_group_heartbeat {
        use super::*;
        pub static API: Api = Api {
            key: 68,
            min: 0,
            max: 1,
            flexible_from: 0,
            body: &CONSUMER_GROUP_HEARTBEAT_REQUEST,
        };
        static CONSUMER_GROUP_HEARTBEAT_REQUEST: Layout = Layout {
            fields: &[
                f("group_id", Str, 0, 1),
                f("member_id", Str, 0, 1),
                f("member_epoch", I32, 0, 1),
                f("instance_id", NStr, 0, 1),
                f("rack_id", NStr, 0, 1),
                f("rebalance_timeout_ms", I32, 0, 1),
                f("subscribed_topic_names", NStrs, 0, 1),
                f("subscribed_topic_regex", NStr, 1, 1),
                f("server_assignor", NStr, 0, 1),
                f("topic_partitions", NArray(&TOPIC_PARTITIONS), 0, 1),
            ],
            tags: &[],
        };
        static TOPIC_PARTITIONS: Layout = Layout {
            fields: &[f("topic_id", UUID, 0, 1), f("partitions", prims(I32), 0, 1)],
            tags: &[],
        };
    }
    pub mod consumer_group_describe {
        use super::*;
        pub static API: Api = Api {
            key: 69,
            min: 0,
            max: 1,
            flexible_from: 0,
            body: &CONSUMER_GROUP_DESCRIBE_REQUEST,
        };
        static CONSUMER_GROUP_DESCRIBE_REQUEST: Layout = Layout {
            fields: &[
                f("group_ids", Strs, 0, 1),
                f("include_authorized_operations", Bool, 0, 1),
            ],
            tags: &[],
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

    const BRIEF_KEYS: [i16; 38] = [
        0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 28,
        32, 33, 35, 36, 37, 42, 44, 47, 60, 61, 65, 66, 68, 69,
    ];

    fn header_version(key: i16, version: i16) -> i16 {
        ApiKey::try_from(key)
            .unwrap()
            .request_header_version(version)
    }

    /// Decodes the body of `api_key` at `version` with the crate's own message type and
    /// encodes it again; `Err` if the crate refuses the bytes.
    fn decode_and_reencode(
        api_key: i16,
        body: &mut Bytes,
        version: i16,
    ) -> anyhow::Result<Vec<u8>> {
        fn round_trip<T: Decodable + Encodable>(
            body: &mut Bytes,
            version: i16,
        ) -> anyhow::Result<Vec<u8>> {
            let message = T::decode(body, version)?;
            let mut out = BytesMut::new();
            message.encode(&mut out, version)?;
            Ok(out.to_vec())
        }
        macro_rules! by_key {
            ($($key:literal => $message:ident,)*) => {
                match api_key {
                    $($key => round_trip::<$message>(body, version),)*
                    _ => anyhow::bail!("api key {api_key} is not guarded"),
                }
            };
        }
        by_key! {
            0 => ProduceRequest, 1 => FetchRequest, 2 => ListOffsetsRequest, 3 => MetadataRequest,
            8 => OffsetCommitRequest, 9 => OffsetFetchRequest, 10 => FindCoordinatorRequest,
            11 => JoinGroupRequest, 12 => HeartbeatRequest, 13 => LeaveGroupRequest,
            14 => SyncGroupRequest, 15 => DescribeGroupsRequest, 16 => ListGroupsRequest,
            17 => SaslHandshakeRequest, 18 => ApiVersionsRequest, 19 => CreateTopicsRequest,
            20 => DeleteTopicsRequest, 21 => DeleteRecordsRequest, 22 => InitProducerIdRequest,
            23 => OffsetForLeaderEpochRequest, 24 => AddPartitionsToTxnRequest,
            25 => AddOffsetsToTxnRequest, 26 => EndTxnRequest, 28 => TxnOffsetCommitRequest,
            32 => DescribeConfigsRequest, 33 => AlterConfigsRequest, 35 => DescribeLogDirsRequest,
            36 => SaslAuthenticateRequest, 37 => CreatePartitionsRequest, 42 => DeleteGroupsRequest,
            44 => IncrementalAlterConfigsRequest, 47 => OffsetDeleteRequest,
            60 => DescribeClusterRequest, 61 => DescribeProducersRequest,
            65 => DescribeTransactionsRequest, 66 => ListTransactionsRequest,
            68 => ConsumerGroupHeartbeatRequest, 69 => ConsumerGroupDescribeRequest,
        }
    }

    /// Decodes `frame` the way the broker will once the guard has passed it, and returns
    /// the crate's re-encoding of header and body.
    fn crate_round_trip(frame: &[u8]) -> anyhow::Result<Vec<u8>> {
        let mut bytes = Bytes::copy_from_slice(frame);
        let key = i16::from_be_bytes([frame[0], frame[1]]);
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let header_version = header_version(key, version);
        let header = RequestHeader::decode(&mut bytes, header_version)?;
        let mut out = BytesMut::new();
        header.encode(&mut out, header_version)?;
        out.extend(decode_and_reencode(key, &mut bytes, version)?);
        Ok(out.to_vec())
    }

    fn all_api_versions() -> impl Iterator<Item = (&'static Api, i16)> {
        APIS.iter()
            .flat_map(|api| (api.min..=api.max).map(move |v| (*api, v)))
    }

    // --- a request synthesiser driven by the layout tables ---------------------------

    fn put_uvarint(out: &mut Vec<u8>, mut v: u32) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn put_len(out: &mut Vec<u8>, flexible: bool, wide: bool, n: usize) {
        if flexible {
            put_uvarint(out, n as u32 + 1);
        } else if wide {
            out.extend((n as i32).to_be_bytes());
        } else {
            out.extend((n as i16).to_be_bytes());
        }
    }

    /// Writes a value of every field present in `version`: two elements per array,
    /// non-null strings and structs, every known tagged field set. Fixed-width fields
    /// are 0x7f bytes, so a table that mistakes one for a length trips the decoder.
    fn put_layout(out: &mut Vec<u8>, layout: &Layout, version: i16, flexible: bool) {
        for field in layout.fields {
            if (field.min..=field.max).contains(&version) {
                put_value(out, field.ty, version, flexible);
            }
        }
        if flexible {
            let tags: Vec<_> = layout
                .tags
                .iter()
                .filter(|k| (k.min..=k.max).contains(&version))
                .collect();
            put_uvarint(out, tags.len() as u32);
            for k in tags {
                let mut content = Vec::new();
                put_value(&mut content, k.ty, version, true);
                put_uvarint(out, k.tag);
                put_uvarint(out, content.len() as u32);
                out.extend(content);
            }
        }
    }

    fn put_value(out: &mut Vec<u8>, ty: Ty, version: i16, flexible: bool) {
        match ty {
            Ty::Fixed(width) => out.extend(std::iter::repeat_n(0x7f, width)),
            Ty::Bool => out.push(1),
            Ty::Str | Ty::NStr => {
                put_len(out, flexible, false, 2);
                out.extend(b"ab");
            }
            Ty::Bytes | Ty::Records => {
                put_len(out, flexible, true, 3);
                out.extend([1, 2, 3]);
            }
            Ty::Prims(width) => {
                put_len(out, flexible, true, 2);
                out.extend(std::iter::repeat_n(0x7f, 2 * width));
            }
            Ty::Strs | Ty::NStrs => {
                put_len(out, flexible, true, 2);
                for _ in 0..2 {
                    put_value(out, Ty::Str, version, flexible);
                }
            }
            Ty::Array(layout) | Ty::NArray(layout) => {
                put_len(out, flexible, true, 2);
                for _ in 0..2 {
                    put_layout(out, layout, version, flexible);
                }
            }
            Ty::One(layout) => put_layout(out, layout, version, flexible),
        }
    }

    fn header_bytes(key: i16, version: i16) -> Vec<u8> {
        let header = RequestHeader::default()
            .with_request_api_key(key)
            .with_request_api_version(version)
            .with_correlation_id(7)
            .with_client_id(Some(StrBytes::from_static_str("runnel-test")));
        let mut out = BytesMut::new();
        header
            .encode(&mut out, header_version(key, version))
            .unwrap();
        out.to_vec()
    }

    /// A fully populated request for `api` at `version`.
    fn synth(api: &Api, version: i16) -> Vec<u8> {
        let mut out = header_bytes(api.key, version);
        put_layout(&mut out, api.body, version, version >= api.flexible_from);
        out
    }

    /// Every API and version, populated, as the crate itself encodes it.
    fn valid_frames() -> Vec<Vec<u8>> {
        all_api_versions().map(|(api, v)| synth(api, v)).collect()
    }

    // --- the tables are exact ----------------------------------------------------------

    #[test]
    fn covers_the_brokers_apis() {
        let keys: Vec<i16> = APIS.iter().map(|api| api.key).collect();
        assert_eq!(keys, BRIEF_KEYS);
        for api in APIS {
            let valid = ApiKey::try_from(api.key).unwrap().valid_versions();
            assert!(
                valid.min <= api.min && api.max <= valid.max,
                "api {}",
                api.key
            );
        }
    }

    /// Synthesise from the table, decode with the crate, re-encode with the crate: the
    /// bytes must come back identical, so the crate read exactly the fields (and tagged
    /// fields) the table describes; then the guard accepts the crate's own encoding.
    #[test]
    fn every_api_and_version_round_trips_through_the_crate() {
        let mut checked = 0;
        for (api, version) in all_api_versions() {
            let frame = synth(api, version);
            assert_eq!(check_request(&frame), Ok(()), "api {} v{version}", api.key);
            let encoded = crate_round_trip(&frame)
                .unwrap_or_else(|e| panic!("crate rejects api {} v{version}: {e}", api.key));
            assert_eq!(
                encoded, frame,
                "api {} v{version} re-encodes differently",
                api.key
            );
            checked += 1;
        }
        assert_eq!(checked, 204);
    }

    /// Requests built with kafka-protocol's builders, tagged fields included.
    #[test]
    fn builder_made_requests_pass() {
        use kafka_protocol::messages::create_topics_request::*;
        use kafka_protocol::messages::fetch_request::*;
        use kafka_protocol::messages::metadata_request::*;
        use kafka_protocol::messages::produce_request::*;
        use kafka_protocol::messages::*;

        let topic_name = || TopicName(StrBytes::from_static_str("orders"));
        let partition = FetchPartition::default()
            .with_partition(3)
            .with_fetch_offset(42);
        let fetch = FetchRequest::default()
            .with_cluster_id(Some(StrBytes::from_static_str("cluster")))
            .with_replica_state(
                ReplicaState::default()
                    .with_replica_id(BrokerId(1))
                    .with_replica_epoch(9),
            )
            .with_topics(vec![
                FetchTopic::default().with_partitions(vec![partition.clone(), partition])
            ])
            .with_forgotten_topics_data(
                vec![ForgottenTopic::default().with_partitions(vec![1, 2])],
            );
        let metadata = MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic_name())),
        ]));
        let produce = ProduceRequest::default().with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name())
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(Bytes::from_static(b"not a real batch")))])]);
        let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(topic_name())
            .with_assignments(vec![CreatableReplicaAssignment::default()
                .with_partition_index(0)
                .with_broker_ids(vec![BrokerId(1), BrokerId(2)])])
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("retention.ms"))
                .with_value(Some(StrBytes::from_static_str("1000")))])]);

        check_built(1, &fetch.clone(), 15..=18);
        check_built(1, &fetch.with_replica_state(Default::default()), 12..=14);
        check_built(3, &metadata, 4..=13);
        check_built(0, &produce, 3..=12);
        check_built(19, &create, 2..=7);
    }

    fn check_built<T>(key: i16, body: &T, versions: std::ops::RangeInclusive<i16>)
    where
        T: Encodable + Decodable + PartialEq + std::fmt::Debug,
    {
        for version in versions {
            let header = RequestHeader::default()
                .with_request_api_key(key)
                .with_request_api_version(version)
                .with_client_id(Some(StrBytes::from_static_str("builder")));
            let mut frame = BytesMut::new();
            header
                .encode(&mut frame, header_version(key, version))
                .unwrap();
            body.encode(&mut frame, version).unwrap();
            assert_eq!(check_request(&frame), Ok(()), "api {key} v{version}");
            assert_eq!(
                crate_round_trip(&frame).unwrap(),
                frame.to_vec(),
                "api {key} v{version}"
            );
            let mut bytes = frame.freeze();
            RequestHeader::decode(&mut bytes, header_version(key, version)).unwrap();
            assert_eq!(
                &T::decode(&mut bytes, version).unwrap(),
                body,
                "api {key} v{version}"
            );
        }
    }

    /// Arrays size their allocation by count; the count bound assumes every element
    /// takes at least one byte, which holds if every struct has a field in each version
    /// it is used at, or is flexible (its tagged-field count is one byte).
    #[test]
    fn every_array_element_takes_at_least_one_byte() {
        fn check(layout: &Layout, version: i16, flexible: bool) {
            let present = layout
                .fields
                .iter()
                .filter(|f| (f.min..=f.max).contains(&version));
            for field in present {
                if let Ty::Array(inner) | Ty::NArray(inner) = field.ty {
                    let element_fields = inner
                        .fields
                        .iter()
                        .filter(|f| (f.min..=f.max).contains(&version));
                    assert!(
                        flexible || element_fields.count() > 0,
                        "{} v{version}",
                        field.name
                    );
                }
                if let Ty::Array(inner) | Ty::NArray(inner) | Ty::One(inner) = field.ty {
                    check(inner, version, flexible);
                }
            }
        }
        for (api, version) in all_api_versions() {
            check(api.body, version, version >= api.flexible_from);
        }
    }

    // --- hostile frames ----------------------------------------------------------------

    #[test]
    fn unknown_api_and_version_are_named() {
        assert_eq!(check_request(&[0, 1]), Err(GuardError::TooShort(2)));
        assert_eq!(
            check_request(&[0x7f, 0, 0, 0, 0, 0, 0, 0]),
            Err(GuardError::UnknownApi(0x7f00))
        );
        // WriteTxnMarkers is a real API, but not one this broker serves.
        assert_eq!(
            check_request(&[0, 27, 0, 1]),
            Err(GuardError::UnknownApi(27))
        );
        // A client newer than us: ApiVersions v9 is answered with v0 by the caller.
        let mut frame = synth(&layouts::api_versions::API, 4);
        frame[3] = 9;
        assert_eq!(
            check_request(&frame),
            Err(GuardError::UnsupportedVersion {
                api_key: 18,
                version: 9
            })
        );
    }

    #[test]
    fn every_strict_prefix_is_rejected_or_decodes() {
        for frame in valid_frames() {
            for len in 0..frame.len() {
                let prefix = &frame[..len];
                if check_request(prefix).is_ok() {
                    assert!(
                        crate_round_trip(prefix).is_ok(),
                        "accepted a prefix the crate rejects"
                    );
                }
            }
        }
    }

    /// Header, then the top-level fields up to the first array, then a count of
    /// 0x7fffffff (non-flexible) or 0xffffffff as a varint (flexible), then four bytes.
    fn huge_array_frame(api: &Api, version: i16) -> Option<Vec<u8>> {
        let flexible = version >= api.flexible_from;
        let mut out = header_bytes(api.key, version);
        for field in api
            .body
            .fields
            .iter()
            .filter(|f| (f.min..=f.max).contains(&version))
        {
            if let Ty::Array(_) | Ty::NArray(_) | Ty::Prims(_) | Ty::Strs | Ty::NStrs = field.ty {
                if flexible {
                    out.extend([0xff, 0xff, 0xff, 0xff, 0x0f]);
                } else {
                    out.extend(0x7fff_ffff_i32.to_be_bytes());
                }
                out.extend([0, 0, 0, 0]);
                return Some(out);
            }
            put_value(&mut out, field.ty, version, flexible);
        }
        None
    }

    #[test]
    fn huge_array_counts_are_rejected() {
        let named = [
            (&layouts::metadata::API, 12),
            (&layouts::metadata::API, 8),
            (&layouts::produce::API, 9),
            (&layouts::produce::API, 8),
            (&layouts::fetch::API, 12),
            (&layouts::fetch::API, 11),
            (&layouts::create_topics::API, 5),
            (&layouts::create_topics::API, 4),
        ];
        for (api, version) in named {
            let frame = huge_array_frame(api, version).unwrap();
            assert!(matches!(
                check_request(&frame),
                Err(GuardError::Malformed { .. })
            ));
        }
        let mut attacked = 0;
        for (api, version) in all_api_versions() {
            if let Some(frame) = huge_array_frame(api, version) {
                let err = check_request(&frame).unwrap_err();
                assert!(
                    matches!(err, GuardError::Malformed { .. }),
                    "api {} v{version}: {err}",
                    api.key
                );
                attacked += 1;
            }
        }
        assert!(attacked > 150, "{attacked}");
    }

    #[test]
    fn huge_lengths_inside_tagged_fields_are_rejected() {
        // Fetch v12 with tag 0 (cluster_id) declaring 1 byte but holding a string that
        // claims 2^32 - 2 bytes.
        let api = &layouts::fetch::API;
        let mut frame = synth(api, 12);
        // The top-level tagged fields: count 1, tag 0, size 3, compact string "ab".
        let tagged_at = frame.len() - 6;
        assert_eq!(frame[tagged_at..], [1, 0, 3, 3, b'a', b'b']);
        frame.truncate(tagged_at);
        let mut lying = frame.clone();
        lying.extend([1, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0]);
        assert!(matches!(
            check_request(&lying),
            Err(GuardError::Malformed { .. })
        ));
        // A size that disagrees with the content would desynchronise guard and decoder.
        let mut padded = frame;
        padded.extend([1, 0, 5, 3, b'a', b'b', 0, 0]);
        assert!(matches!(
            check_request(&padded),
            Err(GuardError::Malformed { .. })
        ));
    }

    /// Seeds the cargo-fuzz corpus with one valid frame per API and version:
    /// `RUNNEL_FUZZ_CORPUS=fuzz/corpus/decode_request cargo test write_fuzz_seed_corpus`.
    /// Does nothing without the variable.
    #[test]
    fn write_fuzz_seed_corpus() {
        let Some(dir) = std::env::var_os("RUNNEL_FUZZ_CORPUS") else {
            return;
        };
        std::fs::create_dir_all(&dir).unwrap();
        for (api, version) in all_api_versions() {
            let path = std::path::Path::new(&dir).join(format!("seed-{}-v{version}", api.key));
            std::fs::write(path, synth(api, version)).unwrap();
        }
    }

    /// A small xorshift generator so the mutation test is reproducible on stable.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    fn mutate(rng: &mut XorShift, frame: &mut Vec<u8>) {
        for _ in 0..1 + rng.below(4) {
            if frame.is_empty() {
                return;
            }
            let at = rng.below(frame.len());
            match rng.below(8) {
                0 => frame[at] = rng.next() as u8,
                1 => frame[at] ^= 1 << rng.below(8),
                2 => frame[at] = [0x00, 0x7f, 0x80, 0xff][rng.below(4)],
                3 => {
                    let huge: &[u8] = [
                        &[0x7f, 0xff, 0xff, 0xff][..],
                        &[0xff, 0xff, 0xff, 0xff, 0x0f],
                    ][rng.below(2)];
                    for (i, b) in huge.iter().enumerate() {
                        if let Some(slot) = frame.get_mut(at + i) {
                            *slot = *b;
                        }
                    }
                }
                4 => frame.truncate(at),
                5 => frame.insert(at, rng.next() as u8),
                6 => {
                    frame.remove(at);
                }
                _ => {
                    let to = rng.below(frame.len());
                    frame[to] = frame[at];
                }
            }
        }
    }

    /// The guard's promise on stable: whatever it accepts the crate decodes without
    /// aborting (an oversized allocation would abort the test binary).
    #[test]
    fn random_mutations_never_reach_a_crashing_decode() {
        let frames = valid_frames();
        let mut rng = XorShift(0x5eed_cafe_f00d_d00d);
        let mut accepted = 0;
        for _ in 0..200_000 {
            let mut frame = frames[rng.below(frames.len())].clone();
            mutate(&mut rng, &mut frame);
            if check_request(&frame).is_ok() {
                accepted += 1;
                let _ = crate_round_trip(&frame);
            }
        }
        assert!(
            accepted > 1000,
            "only {accepted} mutants accepted; the test exercises little"
        );
    }
}
