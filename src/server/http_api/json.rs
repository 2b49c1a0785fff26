//! Reading requests and writing bytes fields.
//!
//! Bodies are parsed into a `serde_json::Value` and read field by field, so that every
//! refusal names the field at fault. Bytes fields (keys, values, header values) are JSON
//! strings holding the UTF-8 text; a record with `"encoding": "base64"` carries all of
//! its bytes fields base64-encoded instead (requests), and a record whose bytes are not
//! all UTF-8 is answered that way (responses).

use std::collections::HashMap;

use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::error::ApiError;

/// A request body, or why axum refused to read it (too large, cut off).
pub type BodyResult = Result<axum::body::Bytes, BytesRejection>;

impl From<BytesRejection> for ApiError {
    fn from(r: BytesRejection) -> ApiError {
        let status = r.status();
        let error = if status == StatusCode::PAYLOAD_TOO_LARGE { "body_too_large" } else { "invalid_body" };
        ApiError::new(status, error, Some("body"), r.body_text())
    }
}

/// The body as a JSON value; 400 naming `body` when it is not JSON.
pub fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::bad("body", format!("not JSON: {e}")))
}

/// `?a=1&b=x` into a map, percent-decoded (`+` is a space); a name outside `allowed` is
/// refused, so a typo does not silently do nothing.
pub fn parse_query(raw: Option<&str>, allowed: &[&str]) -> Result<HashMap<String, String>, ApiError> {
    let mut out = HashMap::new();
    for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(&s.replace('+', " "))
                .decode_utf8()
                .map(|c| c.into_owned())
                .map_err(|_| ApiError::bad(k, "query parameter is not UTF-8"))
        };
        let (k, v) = (decode(k)?, decode(v)?);
        if !allowed.contains(&k.as_str()) {
            return Err(ApiError::bad(&k, format!("unknown query parameter; known: {}", allowed.join(", "))));
        }
        out.insert(k, v);
    }
    Ok(out)
}

/// An integer query parameter within `min..=max`; `None` when absent.
pub fn query_int(q: &HashMap<String, String>, name: &str, min: i64, max: i64) -> Result<Option<i64>, ApiError> {
    let Some(raw) = q.get(name) else { return Ok(None) };
    let v: i64 = raw.trim().parse().map_err(|_| ApiError::bad(name, format!("{raw:?} is not an integer")))?;
    if v < min || v > max {
        return Err(ApiError::bad(name, format!("{v} is outside {min}..={max}")));
    }
    Ok(Some(v))
}

/// The object's member `name`, absent and null alike `None`.
pub fn member<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    obj.get(name).filter(|v| !v.is_null())
}

pub fn as_object<'a>(v: &'a Value, field: &str) -> Result<&'a Map<String, Value>, ApiError> {
    v.as_object().ok_or_else(|| ApiError::bad(field, "must be a JSON object"))
}

/// A required non-empty string of at most `max_len` bytes.
pub fn req_str(obj: &Map<String, Value>, name: &str, field: &str, max_len: usize) -> Result<String, ApiError> {
    let s = member(obj, name).ok_or_else(|| ApiError::bad(field, "is required"))?;
    let s = s.as_str().ok_or_else(|| ApiError::bad(field, "must be a string"))?;
    if s.is_empty() || s.len() > max_len {
        return Err(ApiError::bad(field, format!("must be 1 to {max_len} bytes long")));
    }
    Ok(s.to_owned())
}

/// An optional integer within `min..=max`.
pub fn opt_int(obj: &Map<String, Value>, name: &str, field: &str, min: i64, max: i64) -> Result<Option<i64>, ApiError> {
    let Some(v) = member(obj, name) else { return Ok(None) };
    let v = v.as_i64().ok_or_else(|| ApiError::bad(field, "must be an integer"))?;
    if v < min || v > max {
        return Err(ApiError::bad(field, format!("{v} is outside {min}..={max}")));
    }
    Ok(Some(v))
}

/// Whether a record object says `"encoding": "base64"` (else UTF-8 text); `field` names
/// its `encoding` member.
pub fn is_base64(obj: &Map<String, Value>, field: &str) -> Result<bool, ApiError> {
    match member(obj, "encoding").map(|v| v.as_str()) {
        None => Ok(false),
        Some(Some("base64")) => Ok(true),
        Some(Some("utf-8" | "utf8")) => Ok(false),
        Some(_) => Err(ApiError::bad(field, "must be \"base64\" or \"utf-8\"")),
    }
}

/// A bytes field: `None` for absent or null.
pub fn bytes_field(v: Option<&Value>, base64: bool, field: &str) -> Result<Option<Bytes>, ApiError> {
    let Some(v) = v.filter(|v| !v.is_null()) else { return Ok(None) };
    let s = v.as_str().ok_or_else(|| ApiError::bad(field, "must be a string or null"))?;
    if base64 {
        BASE64.decode(s).map(|b| Some(Bytes::from(b))).map_err(|e| ApiError::bad(field, format!("not base64: {e}")))
    } else {
        Ok(Some(Bytes::copy_from_slice(s.as_bytes())))
    }
}

/// Record headers: an object `{"name": "value"}` or an array `[{"key", "value"}]` (which
/// keeps order and repeated names).
pub fn headers_field(v: Option<&Value>, base64: bool, field: &str) -> Result<Vec<(String, Option<Bytes>)>, ApiError> {
    match v.filter(|v| !v.is_null()) {
        None => Ok(vec![]),
        Some(Value::Object(m)) => {
            m.iter().map(|(k, v)| Ok((k.clone(), bytes_field(Some(v), base64, &format!("{field}.{k}"))?))).collect()
        }
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let f = format!("{field}[{i}]");
                let h = as_object(h, &f)?;
                let key =
                    member(h, "key").and_then(Value::as_str).ok_or_else(|| ApiError::bad(&f, "needs a string key"))?;
                Ok((key.to_owned(), bytes_field(member(h, "value"), base64, &format!("{f}.value"))?))
            })
            .collect(),
        Some(_) => Err(ApiError::bad(field, "must be an object or an array of {key, value}")),
    }
}

/// The JSON of a record's bytes fields: strings when all are UTF-8, else all base64 and
/// `"encoding": "base64"`. Adds `key`, `value`, `headers` (and `encoding`) to `out`.
pub fn put_bytes_fields(
    out: &mut Map<String, Value>,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[(String, Option<&[u8]>)],
) {
    let all_utf8 = key
        .into_iter()
        .chain(value)
        .chain(headers.iter().filter_map(|(_, v)| *v))
        .all(|b| std::str::from_utf8(b).is_ok());
    let enc = |b: Option<&[u8]>| match b {
        None => Value::Null,
        Some(b) if all_utf8 => Value::String(String::from_utf8_lossy(b).into_owned()),
        Some(b) => Value::String(BASE64.encode(b)),
    };
    out.insert("key".into(), enc(key));
    out.insert("value".into(), enc(value));
    out.insert(
        "headers".into(),
        Value::Array(headers.iter().map(|(k, v)| json!({"key": k, "value": enc(*v)})).collect()),
    );
    if !all_utf8 {
        out.insert("encoding".into(), Value::String("base64".into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_is_decoded_and_unknown_names_refused() {
        let q = parse_query(Some("topic=a%20b&offset=+5"), &["topic", "offset"]).unwrap();
        assert_eq!(q["topic"], "a b");
        assert_eq!(query_int(&q, "offset", 0, 10).unwrap(), Some(5));
        assert_eq!(parse_query(Some("tpoic=a"), &["topic"]).unwrap_err().field.as_deref(), Some("tpoic"));
        assert!(query_int(&q, "offset", 6, 10).is_err());
    }

    #[test]
    fn bytes_fields_are_text_or_base64_both_ways() {
        let text = json!("héllo");
        assert_eq!(bytes_field(Some(&text), false, "v").unwrap().unwrap(), Bytes::from("héllo"));
        let b64 = json!("/w==");
        assert_eq!(bytes_field(Some(&b64), true, "v").unwrap().unwrap(), Bytes::from_static(&[0xff]));
        assert_eq!(bytes_field(Some(&json!("*")), true, "v").unwrap_err().field.as_deref(), Some("v"));
        let mut out = Map::new();
        put_bytes_fields(&mut out, Some(b"k"), Some(&[0xff]), &[("h".into(), None)]);
        assert_eq!(
            Value::Object(out),
            json!({"key": "aw==", "value": "/w==", "encoding": "base64",
            "headers": [{"key": "h", "value": null}]})
        );
        let h = headers_field(Some(&json!({"a": "1"})), false, "headers").unwrap();
        assert_eq!(h, vec![("a".to_owned(), Some(Bytes::from("1")))]);
    }
}
