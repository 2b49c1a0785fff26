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
    Malformed { api_key: i16, version: i16, reason: String },
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
    let header_version =
        ApiKey::try_from(api_key).map_err(|()| GuardError::UnknownApi(api_key))?.request_header_version(version);
    let malformed = |reason: String| GuardError::Malformed { api_key, version, reason };
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
        walk_value(cursor, Ty::NStr, header_version, false).map_err(|e| format!("client_id: {e}"))?;
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
    /// Nullable array of fixed-width elements of the given width.
    NPrims(usize),
    /// Array of non-null strings.
    Strs,
    /// Nullable array of non-null strings.
    NStrs,
    Array(&'static Layout),
    NArray(&'static Layout),
    /// A nested struct, always present.
    One(&'static Layout),
    /// A nullable struct: an `i8` marker (negative: null) then, if present, the struct.
    NOne(&'static Layout),
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
    Tagged { tag, name, ty, min, max }
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
        let n = if wide { i32::from_be_bytes(self.read()?) } else { i32::from(i16::from_be_bytes(self.read()?)) };
        match n {
            -1 => Ok(None),
            n if n >= 0 => Ok(Some(n as usize)),
            n => Err(format!("negative length {n}")),
        }
    }

    /// An array count, bounded by the bytes left at `min_element` bytes per element.
    fn count(&mut self, flexible: bool, nullable: bool, min_element: usize) -> Result<usize, String> {
        match self.length(flexible, true)? {
            None if nullable => Ok(0),
            None => Err("null array where none is allowed".to_owned()),
            Some(n) if n.saturating_mul(min_element) > self.remaining() => {
                Err(format!("array of {n} elements but {} bytes remain", self.remaining()))
            }
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

fn walk_layout(cursor: &mut Cursor<'_>, layout: &Layout, version: i16, flexible: bool) -> Result<(), String> {
    for field in layout.fields {
        if (field.min..=field.max).contains(&version) {
            walk_value(cursor, field.ty, version, flexible).map_err(|e| format!("{}: {e}", field.name))?;
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
        Ty::Prims(width) | Ty::NPrims(width) => {
            let n = cursor.count(flexible, matches!(ty, Ty::NPrims(_)), width)?;
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
        Ty::NOne(layout) => match cursor.read::<1>()? {
            [m] if (m as i8) < 0 => Ok(()),
            _ => walk_layout(cursor, layout, version, flexible),
        },
    }
}

fn walk_tagged_fields(cursor: &mut Cursor<'_>, known: &[Tagged], version: i16) -> Result<(), String> {
    let count = cursor.uvarint()? as usize;
    // Each tagged field takes at least two bytes (tag and size).
    if count.saturating_mul(2) > cursor.remaining() {
        return Err(format!("{count} tagged fields but {} bytes remain", cursor.remaining()));
    }
    for _ in 0..count {
        let tag = cursor.uvarint()?;
        let size = cursor.uvarint()? as usize;
        if size > cursor.remaining() {
            return Err(format!("tagged field {tag} of {size} bytes but {} remain", cursor.remaining()));
        }
        match known.iter().find(|k| k.tag == tag) {
            Some(k) if (k.min..=k.max).contains(&version) => {
                let start = cursor.pos;
                walk_value(cursor, k.ty, version, true).map_err(|e| format!("{}: {e}", k.name))?;
                let walked = cursor.pos - start;
                if walked != size {
                    return Err(format!("{}: tagged size {size} but content is {walked} bytes", k.name));
                }
            }
            Some(k) => return Err(format!("tag {tag} ({}) is not valid in this version", k.name)),
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
    &layouts::alter_replica_log_dirs::API,
    &layouts::describe_log_dirs::API,
    &layouts::sasl_authenticate::API,
    &layouts::create_partitions::API,
    &layouts::delete_groups::API,
    &layouts::elect_leaders::API,
    &layouts::incremental_alter_configs::API,
    &layouts::alter_partition_reassignments::API,
    &layouts::list_partition_reassignments::API,
    &layouts::offset_delete::API,
    &layouts::describe_quorum::API,
    &layouts::update_features::API,
    &layouts::describe_cluster::API,
    &layouts::describe_producers::API,
    &layouts::unregister_broker::API,
    &layouts::add_raft_voter::API,
    &layouts::remove_raft_voter::API,
    &layouts::describe_transactions::API,
    &layouts::list_transactions::API,
    &layouts::consumer_group_heartbeat::API,
    &layouts::consumer_group_describe::API,
    &layouts::list_config_resources::API,
    &layouts::describe_topic_partitions::API,
    &layouts::get_telemetry_subscriptions::API,
    &layouts::push_telemetry::API,
];

mod layouts;

#[cfg(test)]
mod tests;
