"""Follower fetching (KIP-392) with a real client: three brokers in racks r1, r2, r3 with
`replica.selector.class` set to Kafka's RackAwareReplicaSelector. A confluent-kafka
(librdkafka) consumer that sets `client.rack` to a follower's rack is sent there by the
leader and reads every record from that follower, in order, while a producer keeps
writing with acks=all; the brokers' own byte counters show who served it. A consumer in
no replica's rack reads from the leader."""
import os
import re
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import netns
from cluster_fixtures import runnel_bin, start_cluster  # noqa: F401 (pytest fixtures)

why_not = netns.available()
pytestmark = pytest.mark.skipif(why_not is not None or bool(os.environ.get("COMPAT_BOOTSTRAP")),
                                reason=why_not or "starts its own brokers")

SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
HTTP_PORT = 9644


@pytest.fixture
def racked3(tmp_path, runnel_bin):
    def extra(i, ip):
        return ["--rack", f"r{i + 1}", "--replica-selector-class", SELECTOR,
                "--http-listen", f"{ip}:{HTTP_PORT}"]
    yield from start_cluster(tmp_path, runnel_bin, 3, extra)


def bytes_out(net, node, topic):
    """The broker's `bytes_out_total` for `topic`: record bytes served to consumers."""
    url = f"http://{net.ips[node.host]}:{HTTP_PORT}/metrics"
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    m = re.search(r'^bytes_out_total\{topic="%s"\} (\d+)' % re.escape(topic), text, re.M)
    return int(m[1]) if m else 0


def produce(bootstrap, topic, start, count):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(start, start + count):
        p.produce(topic, value=f"v{i}".encode(), partition=0)
        p.poll(0)
    assert p.flush(30) == 0


def consume(bootstrap, topic, rack, want, during=None):
    """Values of partition 0 read from offset 0 by a consumer in `rack`, until `want`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{rack}", "client.rack": rack,
                  "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 60
    try:
        while len(got) < want and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value().decode())
                if during and len(got) == 100:
                    during()
    finally:
        c.close()
    return got


def leader_of(bootstrap, topic):
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    return md.topics[topic].partitions[0].leader


def test_a_consumer_reads_from_the_follower_in_its_rack(racked3):
    net, nodes = racked3
    bootstrap = ",".join(n.address for n in nodes)
    topic = "near"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while len(admin.list_topics(timeout=10).brokers) < 3:
        assert time.monotonic() < deadline, "not every broker registered"
        time.sleep(0.2)
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    deadline = time.monotonic() + 30
    while leader_of(bootstrap, topic) < 1:
        assert time.monotonic() < deadline, "no leader"
        time.sleep(0.5)
    produce(bootstrap, topic, 0, 500)
    leader = nodes[leader_of(bootstrap, topic) - 1]
    follower = next(n for n in nodes if n is not leader)
    rack = f"r{nodes.index(follower) + 1}"

    # In the follower's rack: the leader names the follower, which serves every record,
    # also those written while the consumer reads.
    got = consume(bootstrap, topic, rack, 1000, during=lambda: produce(bootstrap, topic, 500, 500))
    assert got == [f"v{i}" for i in range(1000)]
    assert bytes_out(net, follower, topic) > 0, "the follower served the consumer"
    assert bytes_out(net, leader, topic) == 0, "the leader only redirected"

    # In no replica's rack: the leader serves.
    got = consume(bootstrap, topic, "elsewhere", 1000)
    assert got == [f"v{i}" for i in range(1000)]
    assert bytes_out(net, leader, topic) > 0
