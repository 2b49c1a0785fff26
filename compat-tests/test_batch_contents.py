"""Hostile batch contents, seen by a real client (confluent-kafka, i.e. librdkafka).

Between two rounds of records that confluent-kafka produces in each codec, a raw client
sends batches whose contents lie (a record count lower and higher than the records inside,
a record length running past the decompressed bytes, a payload that does not decompress).
Each gets INVALID_RECORD with nothing stored, so librdkafka's consumer reads every good
record at dense offsets, with no error and no stall at the refused produce, and the broker
says so in its log. Before runnel looked inside compressed batches, the lying count gave
two records one offset and the overrunning length stalled this consumer for good.
"""
import pytest

from differential import kwire
from test_confluent_kafka import CODECS, consume_all, create_topic, produce_all

INVALID_RECORD = 87
GOOD = 20


def hostile_batches(codec):
    three = b"".join(kwire.encode_record(b"x" * 10, i) for i in range(3))
    overrun = kwire.encode_record(b"a", 0) + kwire._varint(100) + kwire.encode_record(b"b", 1)[1:]
    yield "count lower than the records", kwire.raw_batch(kwire.compress(codec, three), 2, codec=codec)
    yield "count higher than the records", kwire.raw_batch(kwire.compress(codec, three), 5, codec=codec)
    yield "record length past the data", kwire.raw_batch(kwire.compress(codec, overrun), 2, codec=codec)
    if codec != "none":
        junk = bytes((i * 2654435761 >> 7) & 0xFF for i in range(64))
        yield "undecodable payload", kwire.raw_batch(junk, 2, codec=codec)


@pytest.mark.parametrize("codec", CODECS)
def test_consumer_reads_past_refused_batches(runnel, topic_name, codec):
    create_topic(runnel.bootstrap, topic_name, partitions=1)
    records = [(0, f"k{i}".encode(), f"good-{i}-{codec}".encode() * 3, [], None) for i in range(GOOD)]
    first = produce_all(runnel.bootstrap, topic_name, records[:GOOD // 2], **{"compression.type": codec})
    with kwire.Conn(runnel.bootstrap) as conn:
        for what, batch in hostile_batches(codec):
            r = conn.call("Produce", 9, acks=-1, timeout_ms=30000, topic_data=[{
                "name": topic_name, "partition_data": [{"index": 0, "records": batch}]}])
            p = r["responses"][0]["partition_responses"][0]
            assert p["error_code"] == INVALID_RECORD, f"{what}: {p}"
    second = produce_all(runnel.bootstrap, topic_name, records[GOOD // 2:], **{"compression.type": codec})
    reports = first + second
    assert all(err is None for err, _, _ in reports), reports
    assert [off for _, _, off in reports] == list(range(GOOD)), "dense offsets across the refusals"

    got = consume_all(runnel.bootstrap, topic_name, 1, GOOD)[0]
    assert [(m.offset(), m.value()) for m in got] == [(i, records[i][2]) for i in range(GOOD)]
    if not getattr(runnel, "external", False):
        log = runnel.log_text()
        assert "produce refused: invalid record batch" in log, "a refusal is logged at warn"

