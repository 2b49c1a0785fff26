"""The HTTP listener of the real binary: /health, /ready and a 404, and /metrics scraped
after a librdkafka producer and a consumer group, parsed strictly, with the consumer lag
checked against what the group committed."""
import math
import re
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

TIMEOUT = 30.0
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
SAMPLE = re.compile(rf"^({NAME})(?:\{{((?:{NAME}=\"(?:[^\"\\]|\\.)*\",?)*)\}})? (\S+)$")
LABEL = re.compile(rf"({NAME})=\"((?:[^\"\\]|\\.)*)\"")
TYPE = re.compile(rf"^# TYPE ({NAME}) (counter|gauge|histogram|summary|untyped)$")
HELP = re.compile(rf"^# HELP ({NAME}) .*$")


def http_get(broker, path):
    """(status, body) of GET path on the broker's HTTP listener."""
    assert broker.http_port, "the broker printed no HTTP address"
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{broker.http_port}{path}", timeout=TIMEOUT) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def parse_exposition(text):
    """{(name, frozenset(labels)): value}; fails on any line that is neither a HELP/TYPE
    comment nor `name{labels} value`, and on samples of undeclared families."""
    families, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("#"):
            m = TYPE.match(line)
            if m:
                families[m.group(1)] = m.group(2)
            else:
                assert HELP.match(line), f"bad comment line: {line!r}"
            continue
        m = SAMPLE.match(line)
        assert m, f"bad sample line: {line!r}"
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        value = float(value)  # also accepts +Inf, as the format does
        family = next((name[:-len(s)] for s in ("_bucket", "_sum", "_count")
                       if name.endswith(s) and families.get(name[:-len(s)]) == "histogram"), name)
        assert family in families, f"sample of an undeclared family: {line!r}"
        key = (name, frozenset(LABEL.findall(labels)))
        assert key not in samples, f"duplicate sample: {line!r}"
        samples[key] = value
    return samples


def sample(samples, name, **labels):
    key = (name, frozenset(labels.items()))
    assert key in samples, f"no sample {name}{labels}"
    return samples[key]


def test_health_ready_and_not_found(runnel):
    if runnel.external:
        pytest.skip("needs runnel's HTTP listener")
    assert http_get(runnel, "/health") == (200, "ok\n")
    assert http_get(runnel, "/ready") == (200, "ready\n")
    assert http_get(runnel, "/no-such-page")[0] == 404


def test_metrics_after_a_producer_and_a_consumer_group(runnel, topic_name):
    if runnel.external:
        pytest.skip("needs runnel's HTTP listener")
    producer = Producer({"bootstrap.servers": runnel.bootstrap, "acks": "all"})
    for i in range(20):
        producer.produce(topic_name, value=f"v{i}".encode(), partition=0)
    assert producer.flush(TIMEOUT) == 0

    group = f"g-{topic_name}"
    consumer = Consumer({"bootstrap.servers": runnel.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic_name])
    seen = 0
    deadline = time.monotonic() + TIMEOUT
    while seen < 8 and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            seen += 1
    assert seen >= 8
    # The group has read 8 of the 20 records.
    consumer.commit(offsets=[TopicPartition(topic_name, 0, 8)], asynchronous=False)
    consumer.close()

    status, text = http_get(runnel, "/metrics")
    assert status == 200
    m = parse_exposition(text)
    assert sample(m, "consumer_lag_messages", group=group, topic=topic_name, partition="0") == 12
    assert sample(m, "rebalances_total", group=group) >= 1
    assert sample(m, "produce_latency_seconds_count", acks="all") >= 1
    assert sample(m, "requests_total", api="Produce") >= 1
    assert sample(m, "requests_total", api="JoinGroup") >= 1
    assert sample(m, "bytes_in_total", topic=topic_name) > 0
    assert sample(m, "bytes_out_total", topic=topic_name) > 0
    assert sample(m, "log_size_bytes", topic=topic_name, partition="0") > 0
    assert sample(m, "log_segments", topic=topic_name, partition="0") == 1
    for zero in ("under_replicated_partitions", "isr_shrinks_total", "isr_expands_total",
                 "unclean_leader_elections_total"):
        assert sample(m, zero) == 0, zero
    assert 0 <= sample(m, "broker_disk_used_ratio") <= 1
    # Every histogram's +Inf bucket is its count.
    for (name, labels), value in m.items():
        if name.endswith("_bucket") and ("le", "+Inf") in labels:
            rest = frozenset(l for l in labels if l[0] != "le")
            assert m[(name[:-len("_bucket")] + "_count", rest)] == value
            assert not math.isnan(value)
