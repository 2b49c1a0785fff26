//! The body of a produce request: one record object, an array of them, or
//! `{"records": [...]}`.
//!
//! Two parsers with one meaning. The fast one deserializes into borrowed fields (no
//! `Value` tree, values copied once); anything it does not take as plainly valid goes to
//! the careful one, which reads the body as a `Value` field by field and names the field
//! at fault. So an accepted body means the same either way, and every refusal comes
//! from the careful parser.

use std::borrow::Cow;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;

use super::batch::NewRecord;
use super::error::ApiError;
use super::json::{as_object, bytes_field, headers_field, is_base64, member, opt_int, parse_body};

/// Records in one request at most.
pub const MAX_RECORDS: usize = 1000;

const RECORD_FIELDS: [&str; 6] = ["key", "value", "headers", "partition", "timestamp", "encoding"];

/// The records, each with the partition it names, and whether the body was one record.
#[derive(Debug)]
pub struct ProduceBody {
    pub records: Vec<(NewRecord, Option<i32>)>,
    pub single: bool,
}

pub fn parse(body: &[u8], now: i64) -> Result<ProduceBody, ApiError> {
    if let Some(parsed) = fast(body, now) {
        return Ok(parsed);
    }
    careful(body, now)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FastRecord<'a> {
    #[serde(borrow, default)]
    key: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    value: Option<Cow<'a, str>>,
    #[serde(default)]
    headers: Option<Value>,
    #[serde(default)]
    partition: Option<i64>,
    #[serde(default)]
    timestamp: Option<i64>,
    #[serde(borrow, default)]
    encoding: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FastBatch<'a> {
    #[serde(borrow)]
    records: Vec<FastRecord<'a>>,
}

/// `None`: leave it to the careful parser.
fn fast(body: &[u8], now: i64) -> Option<ProduceBody> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace())?;
    let (items, single) = match first {
        b'[' => (serde_json::from_slice::<Vec<FastRecord>>(body).ok()?, false),
        // One record is cheap either way; a `{"records": [...]}` batch is not.
        b'{' => (serde_json::from_slice::<FastBatch>(body).ok()?.records, false),
        _ => return None,
    };
    if items.is_empty() || items.len() > MAX_RECORDS {
        return None;
    }
    let records = items.into_iter().map(|r| fast_record(r, now)).collect::<Option<Vec<_>>>()?;
    Some(ProduceBody { records, single })
}

fn fast_record(r: FastRecord<'_>, now: i64) -> Option<(NewRecord, Option<i32>)> {
    let b64 = match r.encoding.as_deref() {
        None | Some("utf-8" | "utf8") => false,
        Some("base64") => true,
        Some(_) => return None,
    };
    let bytes = |s: Option<Cow<'_, str>>| -> Option<Option<Bytes>> {
        match s {
            None => Some(None),
            Some(s) if b64 => BASE64.decode(s.as_bytes()).ok().map(|b| Some(Bytes::from(b))),
            Some(s) => Some(Some(Bytes::copy_from_slice(s.as_bytes()))),
        }
    };
    let timestamp = match r.timestamp {
        None => now,
        Some(t) if t >= 0 => t,
        Some(_) => return None,
    };
    let partition = match r.partition {
        None => None,
        Some(p) => Some(i32::try_from(p).ok().filter(|p| *p >= 0)?),
    };
    let headers = headers_field(r.headers.as_ref(), b64, "headers").ok()?;
    let record = NewRecord { key: bytes(r.key)?, value: bytes(r.value)?, headers, timestamp };
    Some((record, partition))
}

/// Field by field, naming the field at fault.
fn careful(body: &[u8], now: i64) -> Result<ProduceBody, ApiError> {
    let body = parse_body(body)?;
    let (items, single) = match &body {
        Value::Array(a) => (a.as_slice(), false),
        Value::Object(o) if o.contains_key("records") => {
            if let Some(other) = o.keys().find(|k| *k != "records") {
                return Err(ApiError::bad(other, "not allowed next to \"records\""));
            }
            match member(o, "records") {
                Some(Value::Array(a)) => (a.as_slice(), false),
                _ => return Err(ApiError::bad("records", "must be an array of records")),
            }
        }
        Value::Object(_) => (std::slice::from_ref(&body), true),
        _ => return Err(ApiError::bad("body", "must be a record object, an array of them or {\"records\": [...]}")),
    };
    if items.is_empty() || items.len() > MAX_RECORDS {
        return Err(ApiError::bad("records", format!("must hold 1 to {MAX_RECORDS} records")));
    }
    let mut records = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let field = if single { String::new() } else { format!("records[{i}].") };
        records.push(careful_record(item, &field, now)?);
    }
    Ok(ProduceBody { records, single })
}

fn careful_record(item: &Value, field: &str, now: i64) -> Result<(NewRecord, Option<i32>), ApiError> {
    let name = |f: &str| format!("{field}{f}");
    let obj = as_object(item, if field.is_empty() { "body" } else { field.trim_end_matches('.') })?;
    if let Some(k) = obj.keys().find(|k| !RECORD_FIELDS.contains(&k.as_str())) {
        return Err(ApiError::bad(&name(k), "unknown field"));
    }
    let b64 = is_base64(obj, &name("encoding"))?;
    let record = NewRecord {
        key: bytes_field(obj.get("key"), b64, &name("key"))?,
        value: bytes_field(obj.get("value"), b64, &name("value"))?,
        headers: headers_field(obj.get("headers"), b64, &name("headers"))?,
        timestamp: opt_int(obj, "timestamp", &name("timestamp"), 0, i64::MAX)?.unwrap_or(now),
    };
    let partition = opt_int(obj, "partition", &name("partition"), 0, i64::from(i32::MAX))?.map(|p| p as i32);
    Ok((record, partition))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast parser accepts what the careful one accepts, with the same meaning.
    #[test]
    fn both_parsers_agree() {
        let bodies = [
            r#"[{"key":"k","value":"v","headers":{"h":"1"},"partition":2,"timestamp":5}]"#,
            r#"[{"value":"/w==","encoding":"base64"},{"key":null,"value":"a\"b\u00e9"}]"#,
            r#"[{"headers":[{"key":"a","value":null},{"key":"a","value":"x"}],"value":"v","encoding":"utf-8"}]"#,
            r#"{"records":[{"key":"k"},{"value":"v","partition":0}]}"#,
        ];
        for b in bodies {
            let f = fast(b.as_bytes(), 9).expect("fast path");
            let c = careful(b.as_bytes(), 9).unwrap();
            assert_eq!(f.records, c.records, "{b}");
            assert_eq!(f.single, c.single);
        }
        for b in [r#"[{"value":"v","partition":-1}]"#, r#"[{"value":"v","x":1}]"#, r#"[{"value":5}]"#, "[]"] {
            assert!(fast(b.as_bytes(), 9).is_none(), "{b}");
            assert!(careful(b.as_bytes(), 9).is_err(), "{b}");
        }
        let e = careful(br#"{"records":[{"value":"v"}],"value":"w"}"#, 0).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("value"));
    }
}
