"""Durability and crash recovery of runnel's log (needs a runnel process it can kill).

1. Every record acknowledged with acks=all survives SIGKILL at the same offset, in order,
   without duplicates — in the default flush mode and in `--flush-mode fsync`; also with
   the kill landing in the middle of an idempotent producer's stream.
2. A torn tail (garbage, half of a copied batch, zero fill) appended to the active
   segment is cut off on restart; earlier records keep their offsets; new produces go on
   at the next offset; the broker log says it truncated.
3. A bit flip inside the last batch (CRC-32C mismatch) truncates that batch only.
"""
import os
import re
import struct
import threading
import time
from collections import namedtuple
from pathlib import Path

import crc32c
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import RunnelProcess
from test_confluent_kafka import consume_all, create_topic, produce_all

pytestmark = pytest.mark.skipif(bool(os.environ.get("COMPAT_BOOTSTRAP")),
                                reason="durability tests kill and restart a local runnel")

TIMEOUT = 30.0
TRUNCATION_LOG = re.compile(r"truncat", re.I)

Batch = namedtuple("Batch", "start end base_offset last_offset magic crc_ok count")


def read_batches(path: Path):
    """Parse Kafka v2 record batches from a segment file. Returns (batches, clean) where
    clean says whether the file ends exactly at a batch boundary."""
    data = path.read_bytes()
    pos, out = 0, []
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        if length < 49 or end > len(data):
            break
        magic = data[pos + 16]
        (crc,) = struct.unpack_from(">I", data, pos + 17)
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        (count,) = struct.unpack_from(">i", data, pos + 57)
        out.append(Batch(pos, end, base, base + delta, magic,
                         crc32c.crc32c(data[pos + 21:end]) == crc, count))
        pos = end
    return out, pos == len(data)


def newest_segment(broker, topic, partition=0) -> Path:
    d = broker.data_dir / f"{topic}-{partition}"
    assert d.is_dir(), f"no partition directory {d}; data dir holds " \
                       f"{sorted(p.name for p in broker.data_dir.iterdir())}"
    logs = sorted(d.glob("*.log"))
    assert logs, f"no *.log segment in {d}: {sorted(p.name for p in d.iterdir())}"
    return logs[-1]


def watermarks(bootstrap, topic, partition=0):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"wm-{topic}",
                  "enable.auto.commit": False})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10,
                                       cached=False)
    finally:
        c.close()


def check_log(got, expected_by_pos):
    """got: {partition: [Message]}; expected_by_pos: {(partition, offset): value}."""
    for part, msgs in got.items():
        offs = [m.offset() for m in msgs]
        assert offs == list(range(len(offs))), f"partition {part}: offsets not dense: " \
                                               f"{offs[:10]}..."
        for m in msgs:
            want = expected_by_pos.get((part, m.offset()))
            if want is not None:
                assert m.value() == want, f"{part}/{m.offset()}: {m.value()!r} != {want!r}"
    present = {(p, m.offset()) for p, msgs in got.items() for m in msgs}
    missing = sorted(set(expected_by_pos) - present)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:5]}"
    values = [m.value() for msgs in got.values() for m in msgs]
    assert len(values) == len(set(values)), "a record is stored twice"


# ------------------------------------------------------------------ 1. SIGKILL

@pytest.fixture(params=["default", "fsync"])
def flush_broker(request, tmp_path):
    args = ["--flush-mode", "fsync"] if request.param == "fsync" else []
    broker = RunnelProcess(tmp_path / "data", extra_args=args)
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()


def test_acked_records_survive_sigkill(flush_broker, topic_name):
    b = flush_broker
    create_topic(b.bootstrap, topic_name, partitions=3)
    n = 5000
    records = [(None, f"k{i % 101}".encode(), f"rec-{i}".encode(), [("i", str(i).encode())],
                None) for i in range(n)]
    t = time.time()
    reports = produce_all(b.bootstrap, topic_name, records,
                          **{"linger.ms": 2, "enable.idempotence": True})
    produce_secs = time.time() - t
    failed = [(i, r) for i, r in enumerate(reports) if r[0] is not None]
    assert not failed, f"{len(failed)} deliveries failed, e.g. {failed[:3]}"
    expected = {(p, o): records[i][2] for i, (_, p, o) in enumerate(reports)}
    assert len(expected) == n, "two records acknowledged at the same offset"

    b.kill()
    b.start()
    ends = [watermarks(b.bootstrap, topic_name, p)[1] for p in range(3)]
    got = consume_all(b.bootstrap, topic_name, 3, sum(ends))
    check_log(got, expected)
    assert sum(ends) == n, f"log end offsets {ends} after restart, {n} records acked"
    print(f"produced {n} acks=all records in {produce_secs:.2f}s")


def test_sigkill_during_idempotent_produce(runnel, topic_name):
    """Kill the broker while an idempotent producer is mid-stream, start it again on
    the same port; the producer retries. Every acknowledged record is at its offset
    and nothing is stored twice (producer state must survive the restart)."""
    b = runnel
    create_topic(b.bootstrap, topic_name, partitions=2)
    n = 4000
    reports = [None] * n
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 1,
                  "enable.idempotence": True, "message.timeout.ms": 60000,
                  "reconnect.backoff.max.ms": 200})

    def cb(i):
        def done(err, msg):
            reports[i] = (err, msg.partition(), msg.offset())
        return done

    def produce_loop():
        for i in range(n):
            while True:
                try:
                    p.produce(topic_name, key=f"k{i % 13}".encode(), value=f"rec-{i}".encode(),
                              on_delivery=cb(i))
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
            if i % 50 == 0:
                time.sleep(0.005)  # spread the stream out so the kill lands inside it

    th = threading.Thread(target=produce_loop, daemon=True)
    th.start()
    deadline = time.time() + TIMEOUT
    while sum(r is not None for r in reports) < n // 4 and time.time() < deadline:
        p.poll(0.01)
    assert sum(r is not None for r in reports) >= n // 4, "producer made no progress"
    acked_before_kill = sum(r is not None for r in reports)
    b.kill()
    b.start()
    th.join(TIMEOUT)
    assert not th.is_alive()
    assert p.flush(90) == 0, "producer could not finish after the restart"
    ok = {(r[1], r[2]): f"rec-{i}".encode() for i, r in enumerate(reports)
          if r is not None and r[0] is None}
    assert len(ok) > n // 4
    ends = [watermarks(b.bootstrap, topic_name, part)[1] for part in range(2)]
    got = consume_all(b.bootstrap, topic_name, 2, sum(ends))
    check_log(got, ok)
    print(f"{acked_before_kill} acked before the kill, {len(ok)} of {n} in the end, "
          f"log end offsets {ends}")


# ------------------------------------------------------------------ 2./3. recovery

def produce_in_batches(bootstrap, topic, batches, per_batch, start=0):
    """Several separate produce calls so the segment holds several batches."""
    out = []
    for bi in range(batches):
        recs = [(0, b"k", f"rec-{start + bi * per_batch + j}".encode(), None, None)
                for j in range(per_batch)]
        reports = produce_all(bootstrap, topic, recs, **{"linger.ms": 0})
        assert all(r[0] is None for r in reports), reports
        out.extend(reports)
    return out


def read_partition0(bootstrap, topic, expected_count):
    got = consume_all(bootstrap, topic, 1, expected_count)
    return [(m.offset(), m.value()) for m in got.get(0, [])]


@pytest.mark.parametrize("tail,shutdown", [
    ("half-batch+garbage", "kill"),
    ("garbage", "kill"),
    ("zeros", "kill"),
    ("half-batch+garbage", "stop"),
])
def test_torn_tail_is_truncated(runnel, topic_name, tail, shutdown):
    b = runnel
    create_topic(b.bootstrap, topic_name, partitions=1)
    n = 100
    reports = produce_in_batches(b.bootstrap, topic_name, 10, n // 10)
    assert [o for _, _, o in reports] == list(range(n))
    b.kill() if shutdown == "kill" else b.stop()

    seg = newest_segment(b, topic_name)
    batches, clean = read_batches(seg)
    assert clean and batches, f"{seg} does not parse as whole v2 batches before corruption"
    assert all(x.magic == 2 and x.crc_ok for x in batches), "bad batch written by the broker"
    assert batches[-1].last_offset == n - 1
    orig_size = seg.stat().st_size
    data = seg.read_bytes()
    last = data[batches[-1].start:batches[-1].end]
    torn = {
        "half-batch+garbage": last[:len(last) // 2] + os.urandom(97),
        "garbage": os.urandom(1000),
        "zeros": bytes(4096),
    }[tail]
    with open(seg, "ab") as f:
        f.write(torn)

    log_before = len(b.log_text())
    b.start()
    assert seg.stat().st_size == orig_size, \
        f"torn tail not cut from {seg.name}: {seg.stat().st_size} bytes, expected {orig_size}"
    assert watermarks(b.bootstrap, topic_name) == (0, n)
    assert read_partition0(b.bootstrap, topic_name, n) == \
        [(i, f"rec-{i}".encode()) for i in range(n)]
    assert TRUNCATION_LOG.search(b.log_text()[log_before:]), \
        "broker log does not mention truncating the torn tail"

    more = produce_in_batches(b.bootstrap, topic_name, 1, 5, start=n)
    assert [o for _, _, o in more] == list(range(n, n + 5))
    assert read_partition0(b.bootstrap, topic_name, n + 5) == \
        [(i, f"rec-{i}".encode()) for i in range(n + 5)]


def test_crc_mismatch_in_last_batch_is_truncated(runnel, topic_name):
    b = runnel
    create_topic(b.bootstrap, topic_name, partitions=1)
    produce_in_batches(b.bootstrap, topic_name, 5, 10)
    b.kill()

    seg = newest_segment(b, topic_name)
    batches, clean = read_batches(seg)
    assert clean and len(batches) >= 2 and all(x.crc_ok for x in batches)
    victim = batches[-1]
    keep = victim.base_offset
    assert keep > 0
    with open(seg, "r+b") as f:
        pos = victim.start + 61 + (victim.end - victim.start - 61) // 2  # inside the records
        f.seek(pos)
        byte = f.read(1)[0]
        f.seek(pos)
        f.write(bytes([byte ^ 0x10]))
    assert not read_batches(seg)[0][-1].crc_ok

    log_before = len(b.log_text())
    b.start()
    assert watermarks(b.bootstrap, topic_name) == (0, keep)
    assert read_partition0(b.bootstrap, topic_name, keep) == \
        [(i, f"rec-{i}".encode()) for i in range(keep)]
    assert TRUNCATION_LOG.search(b.log_text()[log_before:]) or \
        re.search(r"crc|corrupt", b.log_text()[log_before:], re.I), \
        "broker log does not mention the corrupt batch"
    more = produce_in_batches(b.bootstrap, topic_name, 1, 1, start=1000)
    assert [o for _, _, o in more] == [keep]
