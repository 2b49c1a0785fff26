"""confluent-kafka-python (librdkafka) against the broker.

Covers: AdminClient create_topics / create_partitions / describe_configs / list_offsets,
produce with every compression codec (keys, headers, explicit timestamps, murmur2
partitioning), idempotent produce, assign-only consumption (no group protocol), watermarks,
offsets_for_times, and the error paths MSG_SIZE_TOO_LARGE and out-of-range fetch offsets.
"""
import os
import time
from collections import defaultdict

import pytest
from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError, KafkaException,
                             Producer, TopicCollection, TopicPartition)
from confluent_kafka.admin import (AdminClient, ConfigResource, NewPartitions, NewTopic,
                                   OffsetSpec)

TIMEOUT = 30.0
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


# ---------------------------------------------------------------- helpers

def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (the Java default partitioner's hash), as unsigned 32-bit."""
    m, r, mask = 0x5BD1E995, 24, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(length // 4):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail, extra = length & ~3, length % 4
    if extra == 3:
        h ^= data[tail + 2] << 16
    if extra >= 2:
        h ^= data[tail + 1] << 8
    if extra >= 1:
        h ^= data[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h


def java_partition(key: bytes, num_partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def wait_topic(adm, topic, partitions, timeout=TIMEOUT):
    """Wait until metadata shows `partitions` partitions of `topic`, all with a leader."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        md = adm.list_topics(topic=topic, timeout=10)
        t = md.topics.get(topic)
        last = t
        if t is not None and t.error is None and len(t.partitions) == partitions \
                and all(p.leader >= 0 for p in t.partitions.values()):
            return md
        time.sleep(0.1)
    raise AssertionError(f"topic {topic} not ready with {partitions} partitions: {last}")


def create_topic(bootstrap, topic, partitions=3, config=None):
    adm = admin(bootstrap)
    fs = adm.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                     config=config or {})], operation_timeout=20)
    fs[topic].result(timeout=TIMEOUT)
    wait_topic(adm, topic, partitions)
    return adm


def produce_all(bootstrap, topic, records, **conf):
    """Produce (partition|None, key, value, headers, timestamp) tuples; return delivery
    reports in produce order as (err, partition, offset)."""
    cfg = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
           "partitioner": "murmur2_random"}
    cfg.update(conf)
    p = Producer(cfg)
    reports = [None] * len(records)

    def cb(i):
        def done(err, msg):
            reports[i] = (err, msg.partition(), msg.offset())
        return done

    for i, (part, key, value, headers, ts) in enumerate(records):
        kw = {"key": key, "value": value, "headers": headers, "on_delivery": cb(i)}
        if part is not None:
            kw["partition"] = part
        if ts is not None:
            kw["timestamp"] = ts
        while True:
            try:
                p.produce(topic, **kw)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    remaining = p.flush(TIMEOUT)
    assert remaining == 0, f"{remaining} messages not delivered within {TIMEOUT}s"
    assert all(r is not None for r in reports), "missing delivery reports"
    return reports


def consume_all(bootstrap, topic, partitions, expected, timeout=TIMEOUT, **conf):
    """Assign every partition at the beginning (no group protocol) and read until
    `expected` records arrived. Returns {partition: [Message, ...]}."""
    cfg = {"bootstrap.servers": bootstrap, "group.id": f"compat-{topic}",
           "enable.auto.commit": False, "auto.offset.reset": "earliest",
           "enable.partition.eof": False}
    cfg.update(conf)
    c = Consumer(cfg)
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out = defaultdict(list)
        n = 0
        deadline = time.time() + timeout
        while n < expected and time.time() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise AssertionError(f"consume error: {msg.error()}")
            out[msg.partition()].append(msg)
            n += 1
        assert n == expected, f"consumed {n} of {expected} records within {timeout}s"
        # Nothing beyond what we expected shows up.
        extra = c.poll(1.0)
        assert extra is None or extra.error() is not None, \
            f"unexpected extra record at {extra.partition()}/{extra.offset()}"
        return out
    finally:
        c.close()


def headers_of(msg):
    return [(k, v) for k, v in (msg.headers() or [])]


# ---------------------------------------------------------------- tests

def test_murmur2_reference_vectors():
    # Values from Kafka's UtilsTest (signed Java ints).
    def signed(x):
        return x - (1 << 32) if x & 0x80000000 else x
    assert signed(murmur2(b"21")) == -973932308
    assert signed(murmur2(b"foobar")) == -790332482
    assert signed(murmur2(b"a-little-bit-long-string")) == -985981536
    assert signed(murmur2(b"a-little-bit-longer-string")) == -1486304829
    assert signed(murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8")) == -58897971
    assert signed(murmur2(b"abc")) == 479470107


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_roundtrip(shared_runnel, topic_name, codec):
    bootstrap = shared_runnel.bootstrap
    create_topic(bootstrap, topic_name, partitions=3)
    n = 400
    base_ts = int(time.time() * 1000) - 60_000
    records = []
    for i in range(n):
        key = f"key-{i % 37}".encode()
        value = (f"value-{i}-{codec}-" + "x" * (i % 200)).encode()
        headers = [("seq", str(i).encode()), ("codec", codec.encode()),
                   ("dup", b"1"), ("dup", b"2"), ("empty", b"")]
        records.append((None, key, value, headers, base_ts + i))
    reports = produce_all(bootstrap, topic_name, records, **{"compression.type": codec})

    by_part = defaultdict(list)
    for i, (err, part, off) in enumerate(reports):
        assert err is None, f"delivery of record {i} failed: {err}"
        assert part == java_partition(records[i][1], 3), \
            f"record {i} key {records[i][1]!r} went to {part}, murmur2 says " \
            f"{java_partition(records[i][1], 3)}"
        by_part[part].append((off, i))
    for part, lst in by_part.items():
        offsets = [o for o, _ in lst]
        assert offsets == list(range(len(lst))), \
            f"partition {part}: offsets not dense from 0 in produce order: {offsets[:20]}"

    got = consume_all(bootstrap, topic_name, 3, n)
    for part, lst in by_part.items():
        msgs = got[part]
        assert [m.offset() for m in msgs] == [o for o, _ in lst], f"partition {part} order"
        for m, (off, i) in zip(msgs, lst):
            _, key, value, headers, ts = records[i]
            assert m.key() == key and m.value() == value, f"record {i} payload"
            assert headers_of(m) == headers, f"record {i} headers"
            assert m.timestamp() == (1, ts), f"record {i} timestamp {m.timestamp()}"
    assert set(got) == set(by_part)


def test_idempotent_producer(shared_runnel, topic_name):
    bootstrap = shared_runnel.bootstrap
    create_topic(bootstrap, topic_name, partitions=3)
    n = 2000
    records = [(None, f"k{i}".encode(), f"v{i}".encode(), [("i", str(i).encode())], None)
               for i in range(n)]
    reports = produce_all(bootstrap, topic_name, records, **{
        "enable.idempotence": True, "max.in.flight.requests.per.connection": 5,
        "linger.ms": 1, "batch.num.messages": 50})
    assert all(err is None for err, _, _ in reports), [r for r in reports if r[0]][:3]
    pos = {(p, o): i for i, (_, p, o) in enumerate(reports)}
    assert len(pos) == n, "two records acknowledged at the same offset"
    got = consume_all(bootstrap, topic_name, 3, n)
    seen = set()
    for part, msgs in got.items():
        assert [m.offset() for m in msgs] == list(range(len(msgs))), f"gap in {part}"
        for m in msgs:
            i = pos[(part, m.offset())]
            assert m.value() == f"v{i}".encode()
            seen.add(i)
    assert len(seen) == n


def test_list_topics_metadata(shared_runnel, topic_name):
    bootstrap = shared_runnel.bootstrap
    adm = create_topic(bootstrap, topic_name, partitions=3)
    md = adm.list_topics(timeout=10)
    assert topic_name in md.topics, "new topic missing from full metadata"
    assert md.brokers, "no brokers in metadata"
    assert md.controller_id in md.brokers or md.controller_id == -1
    for b in md.brokers.values():
        assert b.host and b.port > 0
    t = md.topics[topic_name]
    assert t.error is None
    assert sorted(t.partitions) == [0, 1, 2]
    for p in t.partitions.values():
        assert p.error is None
        assert p.leader in md.brokers
        assert p.replicas == [p.leader] and p.isrs == [p.leader]
    # describe_topics through the admin API as well
    desc = adm.describe_topics(TopicCollection([topic_name]))[topic_name].result(TIMEOUT)
    assert desc.name == topic_name and len(desc.partitions) == 3
    assert not desc.is_internal


def test_create_topic_errors(shared_runnel, topic_name):
    bootstrap = shared_runnel.bootstrap
    adm = create_topic(bootstrap, topic_name, partitions=1)
    fs = adm.create_topics([NewTopic(topic_name, num_partitions=1, replication_factor=1)])
    with pytest.raises(KafkaException) as ei:
        fs[topic_name].result(timeout=TIMEOUT)
    assert ei.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    bad = topic_name + "-bad"
    fs = adm.create_topics([NewTopic(bad, num_partitions=1, replication_factor=1,
                                     config={"no.such.config": "1"})])
    with pytest.raises(KafkaException) as ei:
        fs[bad].result(timeout=TIMEOUT)
    assert ei.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_describe_configs(shared_runnel, topic_name):
    bootstrap = shared_runnel.bootstrap
    adm = create_topic(bootstrap, topic_name, partitions=1,
                       config={"max.message.bytes": "123456", "retention.ms": "3600000"})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    entries = adm.describe_configs([res])[res].result(timeout=TIMEOUT)
    assert entries["max.message.bytes"].value == "123456"
    assert entries["retention.ms"].value == "3600000"
    assert not entries["max.message.bytes"].is_default
    assert entries["cleanup.policy"].value == "delete"
    assert entries["cleanup.policy"].is_default
    assert "segment.bytes" in entries


def test_create_partitions(shared_runnel, topic_name):
    bootstrap = shared_runnel.bootstrap
    adm = create_topic(bootstrap, topic_name, partitions=1)
    adm.create_partitions([NewPartitions(topic_name, 3)])[topic_name].result(timeout=TIMEOUT)
    wait_topic(adm, topic_name, 3)
    reports = produce_all(bootstrap, topic_name,
                          [(2, b"k", b"in-new-partition", None, None)])
    assert reports == [(None, 2, 0)]
    got = consume_all(bootstrap, topic_name, 3, 1)
    assert [m.value() for m in got[2]] == [b"in-new-partition"]
    # Shrinking is refused.
    with pytest.raises(KafkaException) as ei:
        adm.create_partitions([NewPartitions(topic_name, 2)])[topic_name].result(TIMEOUT)
    assert ei.value.args[0].code() == KafkaError.INVALID_PARTITIONS


def test_watermarks_and_list_offsets(shared_runnel, topic_name):
    bootstrap = shared_runnel.bootstrap
    adm = create_topic(bootstrap, topic_name, partitions=3)
    counts = {0: 5, 1: 0, 2: 17}
    base_ts = int(time.time() * 1000) - 100_000
    records = []
    for p, c in counts.items():
        for i in range(c):
            # partition 2's largest timestamp sits in the middle (offset 9)
            ts = base_ts + (100_000 if (p, i) == (2, 9) else i)
            records.append((p, b"k", f"{p}-{i}".encode(), None, ts))
    reports = produce_all(bootstrap, topic_name, records)
    assert all(r[0] is None for r in reports)

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"wm-{topic_name}",
                  "enable.auto.commit": False})
    try:
        for p, n in counts.items():
            lo, hi = c.get_watermark_offsets(TopicPartition(topic_name, p),
                                             timeout=10, cached=False)
            assert (lo, hi) == (0, n), f"partition {p} watermarks {(lo, hi)}"
    finally:
        c.close()

    def listed(spec):
        req = {TopicPartition(topic_name, p): spec for p in counts}
        fs = adm.list_offsets(req, request_timeout=10)
        return {tp.partition: f.result(timeout=TIMEOUT) for tp, f in fs.items()}

    earliest = listed(OffsetSpec.earliest())
    latest = listed(OffsetSpec.latest())
    assert {p: r.offset for p, r in earliest.items()} == {0: 0, 1: 0, 2: 0}
    assert {p: r.offset for p, r in latest.items()} == counts
    maxts = listed(OffsetSpec.max_timestamp())
    assert maxts[2].offset == 9 and maxts[2].timestamp == base_ts + 100_000
    assert maxts[0].offset == 4 and maxts[0].timestamp == base_ts + 4
    assert maxts[1].offset == -1


def test_offsets_for_times(shared_runnel, topic_name):
    bootstrap = shared_runnel.bootstrap
    adm = create_topic(bootstrap, topic_name, partitions=1)
    t0 = int(time.time() * 1000) - 3_600_000
    records = [(0, None, f"v{i}".encode(), None, t0 + 1000 * i) for i in range(10)]
    # several small batches so the lookup crosses batch boundaries
    for chunk in range(0, 10, 3):
        produce_all(bootstrap, topic_name, records[chunk:chunk + 3])

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"oft-{topic_name}",
                  "enable.auto.commit": False})
    try:
        def lookup(ts):
            r = c.offsets_for_times([TopicPartition(topic_name, 0, ts)], timeout=10)
            assert r[0].error is None
            return r[0].offset
        assert lookup(t0 - 5000) == 0
        assert lookup(t0) == 0
        assert lookup(t0 + 1500) == 2
        assert lookup(t0 + 9000) == 9
        assert lookup(t0 + 9001) == -1  # past every record: end (-1)
    finally:
        c.close()
    fs = adm.list_offsets({TopicPartition(topic_name, 0): OffsetSpec.for_timestamp(t0 + 4000)})
    r = list(fs.values())[0].result(timeout=TIMEOUT)
    assert (r.offset, r.timestamp) == (4, t0 + 4000)


def test_message_too_large(shared_runnel, topic_name):
    bootstrap = shared_runnel.bootstrap
    create_topic(bootstrap, topic_name, partitions=1, config={"max.message.bytes": "1000"})
    big = os.urandom(5000)  # incompressible, well over the topic limit
    reports = produce_all(bootstrap, topic_name, [(0, b"big", big, None, None)],
                          **{"compression.type": "none", "retries": 0})
    err = reports[0][0]
    assert err is not None, "a 5000 byte record was accepted by a topic with " \
                            "max.message.bytes=1000"
    assert err.code() == KafkaError.MSG_SIZE_TOO_LARGE, f"unexpected error {err}"
    # The topic still works and the rejected record left nothing behind.
    reports = produce_all(bootstrap, topic_name, [(0, b"small", b"ok", None, None)])
    assert reports == [(None, 0, 0)]
    got = consume_all(bootstrap, topic_name, 1, 1)
    assert [(m.offset(), m.value()) for m in got[0]] == [(0, b"ok")]


def test_out_of_range_offset(shared_runnel, topic_name):
    bootstrap = shared_runnel.bootstrap
    create_topic(bootstrap, topic_name, partitions=1)
    produce_all(bootstrap, topic_name, [(0, None, f"v{i}".encode(), None, None)
                                        for i in range(3)])

    def first_event(reset):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"oor-{topic_name}",
                      "enable.auto.commit": False, "auto.offset.reset": reset})
        try:
            c.assign([TopicPartition(topic_name, 0, 100)])
            deadline = time.time() + TIMEOUT
            while time.time() < deadline:
                msg = c.poll(0.5)
                if msg is not None:
                    return msg
            raise AssertionError(f"no record or error within {TIMEOUT}s (reset={reset})")
        finally:
            c.close()

    msg = first_event("error")
    assert msg.error() is not None, f"read offset {msg.offset()} instead of an error"
    assert msg.error().code() in (KafkaError._AUTO_OFFSET_RESET,
                                  KafkaError.OFFSET_OUT_OF_RANGE), msg.error()
    msg = first_event("earliest")
    assert msg.error() is None and (msg.offset(), msg.value()) == (0, b"v0")
