"""franz-go (Go) against the broker, through compat-tests/franz (built by setup/go.sh).

franz-go's defaults are worth testing as-is: idempotent producer with acks=all, murmur2
key partitioning, flexible request versions, direct partition consumption (no group).
Set FRANZ_BIN to use a prebuilt helper.
"""
import json
import os
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import pytest

from test_confluent_kafka import consume_all, create_topic, java_partition, produce_all

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def franz():
    path = os.environ.get("FRANZ_BIN")
    if not path:
        out = subprocess.run(["bash", str(HERE / "setup" / "go.sh")], capture_output=True,
                             text=True, timeout=600)
        assert out.returncode == 0, f"setup/go.sh failed:\n{out.stderr[-3000:]}"
        path = out.stdout.strip().splitlines()[-1]
    assert Path(path).is_file(), path
    return path


def run(franz, *args, timeout=90):
    p = subprocess.run([franz, *map(str, args)], capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, f"franz {' '.join(map(str, args))} exited {p.returncode}:\n" \
                              f"{p.stderr[-3000:]}"
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


def check_roundtrip(produced, consumed):
    by_part = defaultdict(list)
    for r in produced:
        by_part[r["partition"]].append(r)
    got = defaultdict(list)
    for r in consumed:
        got[r["partition"]].append(r)
    assert set(got) == set(by_part)
    for part, recs in by_part.items():
        assert [r["offset"] for r in recs] == list(range(len(recs))), \
            f"partition {part}: produce offsets not dense in produce order"
        c = got[part]
        assert [r["offset"] for r in c] == [r["offset"] for r in recs], f"partition {part}"
        for a, b in zip(recs, c):
            assert (a["key"], a["value"], a["headers"]) == (b["key"], b["value"], b["headers"])


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_franz_roundtrip(shared_runnel, topic_name, franz, codec):
    b = shared_runnel.bootstrap
    n = 500
    produced = run(franz, "produce", "-brokers", b, "-topic", topic_name, "-n", n,
                   "-partitions", 3, "-compression", codec)
    assert len(produced) == n
    for i, r in enumerate(produced):
        assert r["value"] == f"value-{i}-{codec}"
        assert r["headers"] == [{"key": "seq", "value": str(i)},
                                {"key": "client", "value": "franz-go"}]
        assert r["partition"] == java_partition(r["key"].encode(), 3), \
            f"record {i}: franz-go's murmur2 partitioner disagrees"
    consumed = run(franz, "consume", "-brokers", b, "-topic", topic_name, "-n", n,
                   "-timeout", "30s")
    assert len(consumed) == n
    check_roundtrip(produced, consumed)

    counts = defaultdict(int)
    for r in produced:
        counts[r["partition"]] += 1
    offs = run(franz, "offsets", "-brokers", b, "-topic", topic_name)
    assert {o["partition"]: (o["start"], o["end"]) for o in offs} == \
        {p: (0, counts[p]) for p in range(3)}


def test_franz_produce_confluent_consume(shared_runnel, topic_name, franz):
    b = shared_runnel.bootstrap
    produced = run(franz, "produce", "-brokers", b, "-topic", topic_name, "-n", 200,
                   "-partitions", 2, "-compression", "lz4")
    got = consume_all(b, topic_name, 2, 200)
    consumed = [{"partition": m.partition(), "offset": m.offset(), "key": m.key().decode(),
                 "value": m.value().decode(),
                 "headers": [{"key": k, "value": v.decode()} for k, v in m.headers()]}
                for msgs in got.values() for m in msgs]
    check_roundtrip(produced, consumed)


def test_confluent_produce_franz_consume(shared_runnel, topic_name, franz):
    b = shared_runnel.bootstrap
    create_topic(b, topic_name, partitions=2)
    ts = int(time.time() * 1000) - 5000
    records = [(None, f"k{i % 7}".encode(), f"v{i}".encode(), [("i", str(i).encode())], ts)
               for i in range(150)]
    reports = produce_all(b, topic_name, records, **{"compression.type": "snappy"})
    assert all(r[0] is None for r in reports)
    produced = [{"partition": p, "offset": o, "key": records[i][1].decode(),
                 "value": records[i][2].decode(), "headers": [{"key": "i", "value": str(i)}]}
                for i, (_, p, o) in enumerate(reports)]
    consumed = run(franz, "consume", "-brokers", b, "-topic", topic_name, "-n", 150,
                   "-timeout", "30s")
    check_roundtrip(produced, consumed)
    assert all(r["timestamp"] == ts for r in consumed)
