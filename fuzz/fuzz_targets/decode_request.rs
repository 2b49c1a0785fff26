//! Arbitrary bytes as a request frame (after the size prefix). Whatever the guard
//! accepts is decoded with kafka-protocol exactly as the broker does; the decoder may
//! return an error but must never panic or allocate beyond `-malloc_limit_mb`.
#![no_main]

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use kafka_protocol::protocol::Decodable;
use libfuzzer_sys::fuzz_target;
use runnel::protocol::guard::check_request;

fuzz_target!(|frame: &[u8]| {
    if check_request(frame).is_err() {
        return;
    }
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api = ApiKey::try_from(api_key).expect("the guard accepts only known api keys");
    let mut bytes = Bytes::copy_from_slice(frame);
    if RequestHeader::decode(&mut bytes, api.request_header_version(version)).is_ok() {
        let _ = RequestKind::decode(api, &mut bytes, version);
    }
});
