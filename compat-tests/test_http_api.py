"""The HTTP API of the real binary, with real Kafka clients on the other side: records
produced over HTTP read by confluent-kafka; the Java producer and HTTP agreeing on the
partition of every key; and a consumer group shared by an HTTP member and a librdkafka
member (disjoint partitions, the HTTP member's commits resumed from by librdkafka, the
HTTP member listed by kafka-consumer-groups and rebalanced out once it stops polling),
with the HTTP member as the group's leader and as a follower of a librdkafka leader.
"""
import base64
import json
import threading
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, TopicPartition

from conftest import RunnelProcess
from kafka_tools import CONSOLE_PRODUCER, CONSUMER_GROUPS, describe, run_tool
from test_kafka_tools import murmur2_partition

TIMEOUT = 30.0
SESSION_MS = 5000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One broker for the module; short group sessions so a lapsed member goes quickly."""
    b = RunnelProcess(tmp_path_factory.mktemp("http-api") / "data",
                      extra_args=["--group-min-session-timeout-ms", "1000"])
    b.start()
    yield b
    b.kill()


def call(broker, method, path, body=None):
    """(status, parsed JSON body) of one request to the HTTP API."""
    assert broker.http_port, "the broker printed no HTTP address"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{broker.http_port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def create(broker, name, partitions):
    status, body = call(broker, "POST", "/topics", {"name": name, "partitions": partitions})
    assert status == 201, body


def consumer(broker, group, **extra):
    cfg = {"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
           "auto.offset.reset": "earliest"}
    cfg.update(extra)
    return Consumer(cfg)


def read_partitions(broker, topic, partitions, expected):
    """Every record of the partitions, read by an assigned (group-less) confluent-kafka consumer."""
    c = consumer(broker, "unused")
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    got, deadline = [], time.time() + TIMEOUT
    while len(got) < expected and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m)
    c.close()
    assert len(got) == expected, f"read {len(got)} of {expected}"
    return got


def test_http_produce_then_confluent_consume(broker, topic_name):
    create(broker, topic_name, 3)
    records = [{"key": f"k{i}", "value": f"v{i}", "headers": {"n": str(i)}} for i in range(99)]
    records.append({"value": base64.b64encode(b"\xff\x00").decode(), "encoding": "base64", "partition": 1})
    status, body = call(broker, "POST", f"/topics/{topic_name}/messages?acks=all", records)
    assert status == 200, body
    placed = body["offsets"]
    assert [p["partition"] for p in placed[:99]] == [murmur2_partition(f"k{i}".encode(), 3) for i in range(99)]
    got = read_partitions(broker, topic_name, range(3), 100)
    by_value = {m.value(): m for m in got}
    for i in range(99):
        m = by_value[f"v{i}".encode()]
        assert (m.key(), m.headers(), m.partition(), m.offset()) == \
               (f"k{i}".encode(), [("n", str(i).encode())], placed[i]["partition"], placed[i]["offset"])
    assert by_value[b"\xff\x00"].partition() == 1
    status, w = call(broker, "GET", f"/topics/{topic_name}/partitions/1/watermark")
    assert status == 200 and w["earliest"] == 0 and w["latest"] == sum(p["partition"] == 1 for p in placed)


def test_java_producer_and_http_agree_on_key_partitions(broker, topic_name):
    create(broker, topic_name, 7)
    keys = [f"key-{i}" for i in range(60)] + ["é", "a longer key with spaces", "x" * 33]
    proc = run_tool(CONSOLE_PRODUCER, "--bootstrap-server", broker.bootstrap, "--topic", topic_name,
                    "--reader-property", "parse.key=true", "--reader-property", "key.separator=\t",
                    input="".join(f"{k}\tjava\n" for k in keys))
    assert proc.returncode == 0, describe(proc)
    status, body = call(broker, "POST", f"/topics/{topic_name}/messages",
                        {"records": [{"key": k, "value": "http"} for k in keys]})
    assert status == 200, body
    got = read_partitions(broker, topic_name, range(7), 2 * len(keys))
    where = {}
    for m in got:
        where.setdefault(m.key().decode(), {})[m.value().decode()] = m.partition()
    for k in keys:
        assert where[k]["java"] == where[k]["http"], (k, where[k])
    assert len({where[k]["http"] for k in keys}) == 7, "the keys should spread over every partition"


def http_poll(broker, group, member, wait_ms=0):
    status, body = call(broker, "GET", f"/consumer-groups/{group}/poll?consumer_id={member}&max_wait_ms={wait_ms}")
    assert status == 200, body
    return body


def owned(body):
    return sorted(p for t in body["assigned_partitions"] for p in t["partitions"])


def describe_group(broker, group):
    proc = run_tool(CONSUMER_GROUPS, "--bootstrap-server", broker.bootstrap, "--describe", "--group", group)
    assert proc.returncode == 0, describe(proc)
    lines = proc.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:1] == ["GROUP"])
    header = lines[head].split()
    return [dict(zip(header, row.split())) for row in lines[head + 1:] if row.strip()]


def test_mixed_group_of_http_and_librdkafka_members(broker, topic_name):
    group = f"g-{topic_name}"
    create(broker, topic_name, 4)
    for p in range(4):
        status, body = call(broker, "POST", f"/topics/{topic_name}/messages",
                            [{"value": f"p{p}-{i}", "partition": p} for i in range(10)])
        assert status == 200, body

    status, joined = call(broker, "POST", f"/consumer-groups/{group}/join",
                          {"consumer_id": "http-1", "topics": [topic_name], "session_timeout_ms": SESSION_MS})
    assert status == 200 and owned(joined) == [0, 1, 2, 3], joined
    member_id = joined["member_id"]

    # librdkafka joins; the HTTP member keeps polling and is rebalanced transparently.
    rk = consumer(broker, group, **{"session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
    rk.subscribe([topic_name])
    deadline = time.time() + TIMEOUT
    while True:
        rk.poll(0.2)
        mine = sorted(tp.partition for tp in rk.assignment())
        http = owned(http_poll(broker, group, "http-1"))
        if len(mine) == 2 and len(http) == 2:
            break
        assert time.time() < deadline, (mine, http)
    assert sorted(mine + http) == [0, 1, 2, 3], (mine, http)

    # The HTTP member reads its partitions (from offset 0: its polls while it owned all
    # four already moved its positions) and commits 5 of each.
    seen = {}
    for p in http:
        status, body = call(broker, "GET", f"/consumer-groups/{group}/poll?consumer_id=http-1"
                                           f"&topic={topic_name}&partition={p}&offset=0&max_wait_ms=0")
        assert status == 200, body
        seen[p] = [r["offset"] for r in body["records"]]
        rk.poll(0.05)
    assert sorted(seen) == http and all(v == list(range(10)) for v in seen.values()), seen
    status, body = call(broker, "POST", f"/consumer-groups/{group}/commit",
                        {"consumer_id": "http-1", "offsets": [
                            {"topic": topic_name, "partition": p, "offset": 5} for p in http]})
    assert status == 200, body

    # kafka-consumer-groups lists the HTTP member with its partitions and their lag.
    rows = {int(r["PARTITION"]): r for r in describe_group(broker, group)}
    for p in http:
        assert rows[p]["CONSUMER-ID"] == member_id and rows[p]["CLIENT-ID"] == "http-1", rows
        assert (rows[p]["CURRENT-OFFSET"], rows[p]["LAG"]) == ("5", "5"), rows
    for p in mine:
        assert rows[p]["CONSUMER-ID"] != member_id, rows

    # The HTTP member stops polling: after its session timeout librdkafka owns everything
    # and resumes the HTTP member's partitions from its commits.
    first = {}
    deadline = time.time() + TIMEOUT
    while len(rk.assignment()) < 4 or len(first) < 4:
        m = rk.poll(0.2)
        if m is not None and m.error() is None:
            first.setdefault(m.partition(), m.offset())
        assert time.time() < deadline, (rk.assignment(), first)
    for p in http:
        assert first[p] == 5, first
    rk.close()
    status, body = call(broker, "GET", f"/consumer-groups/{group}/poll?consumer_id=http-1")
    assert status == 404 and body["field"] == "consumer_id", body


def test_http_member_follows_a_librdkafka_leader(broker, topic_name):
    """librdkafka joins first and leads: it reads the HTTP member's subscription and hands
    it half of the partitions in the consumer protocol's encoding."""
    group = f"g-{topic_name}"
    create(broker, topic_name, 4)
    rk = consumer(broker, group, **{"session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
    rk.subscribe([topic_name])
    deadline = time.time() + TIMEOUT
    while len(rk.assignment()) < 4:
        rk.poll(0.2)
        assert time.time() < deadline, rk.assignment()
    # The join parks until librdkafka rejoined; its poll loop runs meanwhile.
    result = {}

    def join():
        result["join"] = call(broker, "POST", f"/consumer-groups/{group}/join",
                              {"consumer_id": "http-2", "topics": [topic_name], "session_timeout_ms": SESSION_MS})

    t = threading.Thread(target=join)
    t.start()
    while t.is_alive():
        rk.poll(0.1)
        assert time.time() < deadline + TIMEOUT, "the join did not complete"
    status, joined = result["join"]
    assert status == 200, joined
    while True:
        rk.poll(0.1)
        mine = sorted(tp.partition for tp in rk.assignment())
        http = owned(http_poll(broker, group, "http-2"))
        if len(mine) == 2 and len(http) == 2:
            break
        assert time.time() < deadline + TIMEOUT, (mine, http)
    assert sorted(mine + http) == [0, 1, 2, 3], (mine, http)
    rk.close()
