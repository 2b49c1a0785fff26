"""kafka-python (pure Python protocol implementation) against the broker.

KafkaAdminClient topic creation and description, KafkaProducer with acks=all and each
compression codec (keys, headers, timestamps, default murmur2 partitioner), KafkaConsumer
with assign + seek_to_beginning (no group), beginning/end offsets and offsets_for_times.
"""
import time
import warnings
from collections import defaultdict

import pytest

# kafka-python 3.0 loads its protocol schemas with deprecated importlib.resources calls.
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"kafka\.|importlib")
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import TopicAlreadyExistsError

from test_confluent_kafka import java_partition

TIMEOUT = 30.0


def create_topic(bootstrap, topic, partitions):
    adm = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    try:
        adm.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}},
                          wait_for_metadata=True)
        with pytest.raises(TopicAlreadyExistsError):
            adm.create_topics({topic: {"num_partitions": partitions,
                                       "replication_factor": 1}})
        [desc] = adm.describe_topics([topic])
        assert desc["name"] == topic and desc["error_code"] == 0
        assert sorted(p["partition_index"] for p in desc["partitions"]) == \
            list(range(partitions))
    finally:
        adm.close()


def produce(bootstrap, topic, records, **conf):
    """records: (partition|None, key, value, headers, timestamp_ms). Returns RecordMetadata
    per record in produce order."""
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, **conf)
    try:
        futs = [p.send(topic, key=k, value=v, headers=h, partition=part, timestamp_ms=ts)
                for part, k, v, h, ts in records]
        p.flush(timeout=TIMEOUT)
        return [f.get(timeout=TIMEOUT) for f in futs]
    finally:
        p.close(timeout=10)


def consumer(bootstrap):
    return KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                         enable_auto_commit=False, auto_offset_reset="earliest",
                         request_timeout_ms=20000)


def consume_all(bootstrap, topic, partitions, expected):
    c = consumer(bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning()
        out = defaultdict(list)
        n = 0
        deadline = time.time() + TIMEOUT
        while n < expected and time.time() < deadline:
            for tp, recs in c.poll(timeout_ms=500).items():
                out[tp.partition].extend(recs)
                n += len(recs)
        assert n == expected, f"consumed {n} of {expected} records within {TIMEOUT}s"
        assert not any(c.poll(timeout_ms=1000).values()), "records beyond those produced"
        return out
    finally:
        c.close()


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_roundtrip(shared_runnel, topic_name, codec):
    bootstrap = shared_runnel.bootstrap
    create_topic(bootstrap, topic_name, 3)
    base_ts = int(time.time() * 1000) - 10_000
    n = 300
    records = [(None, f"key-{i % 23}".encode(), (f"value-{i}-{codec}-" + "y" * (i % 97)).encode(),
                [("seq", str(i).encode()), ("client", b"kafka-python")], base_ts + i)
               for i in range(n)]
    metas = produce(bootstrap, topic_name, records, compression_type=codec)
    by_part = defaultdict(list)
    for i, md in enumerate(metas):
        assert md.partition == java_partition(records[i][1], 3), f"record {i} partition"
        by_part[md.partition].append((md.offset, i))
    for part, lst in by_part.items():
        assert [o for o, _ in lst] == list(range(len(lst))), f"partition {part} offsets"

    got = consume_all(bootstrap, topic_name, 3, n)
    assert set(got) == set(by_part)
    for part, lst in by_part.items():
        recs = got[part]
        assert [r.offset for r in recs] == [o for o, _ in lst], f"partition {part} order"
        for r, (_, i) in zip(recs, lst):
            _, key, value, headers, ts = records[i]
            assert (r.key, r.value, list(r.headers), r.timestamp) == (key, value, headers, ts)


def test_offsets(shared_runnel, topic_name):
    bootstrap = shared_runnel.bootstrap
    create_topic(bootstrap, topic_name, 2)
    t0 = int(time.time() * 1000) - 3_600_000
    counts = {0: 7, 1: 3}
    records = [(p, None, f"{p}-{i}".encode(), None, t0 + 1000 * i)
               for p, c in counts.items() for i in range(c)]
    metas = produce(bootstrap, topic_name, records, compression_type="gzip")
    assert [(m.partition, m.offset) for m in metas] == \
        [(p, i) for p, c in counts.items() for i in range(c)]

    c = consumer(bootstrap)
    try:
        tps = {p: TopicPartition(topic_name, p) for p in counts}
        assert c.beginning_offsets(list(tps.values()), timeout_ms=20000) == \
            {tps[0]: 0, tps[1]: 0}
        assert c.end_offsets(list(tps.values()), timeout_ms=20000) == \
            {tps[0]: 7, tps[1]: 3}
        r = c.offsets_for_times({tps[0]: t0 + 2500, tps[1]: t0}, timeout_ms=20000)
        assert (r[tps[0]].offset, r[tps[0]].timestamp) == (3, t0 + 3000)
        assert (r[tps[1]].offset, r[tps[1]].timestamp) == (0, t0)
        r = c.offsets_for_times({tps[1]: t0 + 2001}, timeout_ms=20000)
        assert r[tps[1]] is None, f"expected no offset after the last timestamp, got {r}"
        # position-based reads after a seek land on the right record
        c.assign([tps[0]])
        c.seek(tps[0], 5)
        deadline = time.time() + TIMEOUT
        first = None
        while first is None and time.time() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                first = first or recs[0]
        assert first is not None and (first.offset, first.value) == (5, b"0-5")
    finally:
        c.close()
