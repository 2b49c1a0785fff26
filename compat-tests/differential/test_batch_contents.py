"""What is inside a produced batch, in every codec: counts that lie, records that overrun,
bad varints, undecodable payloads, offset deltas out of order. Kafka 4.4's log validator
refuses most of these with INVALID_RECORD; runnel refuses all of them with INVALID_RECORD
and stores nothing. Where Kafka stores a batch that breaks its consumers, or answers
UNKNOWN_SERVER_ERROR, the test states both answers (FINDINGS.md, "Batch contents")."""
import os

import pytest

from . import kwire
from .helpers import create_topic, fetch, list_offsets, produce_batch, produce_ok

INVALID_RECORD = 87
UNKNOWN_SERVER_ERROR = -1
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def rec(delta, value=b"v"):
    return kwire.encode_record(value, delta)


def recs(*deltas):
    return b"".join(rec(d) for d in deltas)


def overrunning_length():
    # The second record's length claims 100 bytes; 8 are there.
    return rec(0) + kwire._varint(100) + rec(1)[1:]


def bad_varint():
    # A 6-byte record whose timestamp delta varint never ends.
    return rec(0) + b"\x0c\x00" + b"\xff" * 11


# name: (record section before compression, header count)
CASES = {
    "more_records_than_counted": (recs(0, 1, 2), 2),
    "fewer_records_than_counted": (recs(0, 1, 2), 5),
    "torn_last_record": (rec(0) + rec(1)[:-3], 2),
    "overrunning_length": (overrunning_length(), 2),
    "bad_varint": (bad_varint(), 2),
    "bytes_after_last_record": (recs(0, 1) + b"\x00\x00", 2),
    "offset_deltas_out_of_order": (recs(0, 2, 1), 3),
    "offset_delta_gap": (recs(0, 1, 3), 3),
}


def kafka_answer(case, codec):
    """What Kafka 4.4 answers (error code, records stored), observed with this suite."""
    if case.startswith("offset_delta"):
        # Kafka renumbers an uncompressed batch's records and fails a compressed one
        # while rebuilding it.
        return (0, 3) if codec == "none" else (UNKNOWN_SERVER_ERROR, 0)
    if case == "overrunning_length" and codec != "none":
        # Kafka's compressed-record reader does not notice; the batch is stored.
        return (0, 2)
    return (INVALID_RECORD, 0)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_batch_contents_are_validated(conn, topic, broker, codec, case):
    create_topic(conn, topic)
    produce_ok(conn, topic, [b"before"])
    section, count = CASES[case]
    p = produce_batch(conn, topic, kwire.raw_batch(kwire.compress(codec, section), count, codec=codec))
    code, stored = kafka_answer(case, codec) if broker == "kafka" else (INVALID_RECORD, 0)
    assert p["error_code"] == code, p
    assert list_offsets(conn, topic, -1)["offset"] == 1 + stored
    if stored:
        return
    # Nothing of the refused batch was stored: the next record takes the next offset and
    # a consumer reads straight past the refusal.
    assert produce_ok(conn, topic, [b"after"]) == 1
    assert [v for _, _, v in kwire.parse_batches(fetch(conn, topic, 0)["records"])] == [b"before", b"after"]


@pytest.mark.parametrize("codec", CODECS[1:])
def test_undecodable_payload(conn, topic, broker, codec):
    create_topic(conn, topic)
    junk = bytes((i * 2654435761 >> 7) & 0xFF for i in range(64))
    p = produce_batch(conn, topic, kwire.raw_batch(junk, 2, codec=codec))
    # Kafka fails to decompress and answers UNKNOWN_SERVER_ERROR; runnel INVALID_RECORD.
    assert p["error_code"] == (UNKNOWN_SERVER_ERROR if broker == "kafka" else INVALID_RECORD), p
    assert list_offsets(conn, topic, -1)["offset"] == 0
    assert produce_ok(conn, topic, [b"after"]) == 0


@pytest.mark.parametrize("codec", CODECS)
def test_honest_batches_in_every_codec(conn, topic, codec):
    create_topic(conn, topic)
    values = [os.urandom(8).hex().encode() for _ in range(5)]
    section = b"".join(kwire.encode_record(v, i) for i, v in enumerate(values))
    p = produce_batch(conn, topic, kwire.raw_batch(kwire.compress(codec, section), 5, codec=codec))
    assert (p["error_code"], p["base_offset"]) == (0, 0), p
    assert list_offsets(conn, topic, -1)["offset"] == 5
