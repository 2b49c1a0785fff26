"""A three-broker runnel cluster with 2,000 partitions of replication factor 3, a size a
Kafka cluster of three carries without notice. A broker dies (SIGKILL) and comes back:
every partition must get a live leader, and then every ISR must hold all three
replicas again, as the returning broker catches up. Its 2,000 ISR additions reach the
controller together; they once came one request per partition, filled the brokers'
blocking thread pools with waiting requests, and starved the metadata apply that would
have answered them: no ISR grew back for minutes, and heartbeats timed out. Then a
controlled shutdown (SIGTERM) of a broker leading about 700 of them: its leadership moves
off before it exits, and acks=all writes to every partition succeed on the two left.

And 700 clients creating a topic each at the same moment (a fleet of services starting):
every one is answered with success. Each request's wait for its commit once held a
blocking thread, and the commit itself needed one; 700 of them held all of tokio's 512,
and all but a few timed out after 15 s (NOT_CONTROLLER), heartbeats starved, and brokers
were fenced (INVALID_REPLICATION_FACTOR for the rest)."""
import collections
import os
import resource
import signal
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import netns
from differential import kwire
from cluster_fixtures import cluster3, runnel_bin, wait_for  # noqa: F401 (pytest fixtures)
from test_cluster_tools import bootstrap

why_not = netns.available()
pytestmark = pytest.mark.skipif(why_not is not None or bool(os.environ.get("COMPAT_BOOTSTRAP")),
                                reason=why_not or "starts its own brokers")

TOPIC = "wide"
PARTITIONS = 2000


def layout(servers):
    """{partition: (leader, isr)} from Metadata."""
    admin = AdminClient({"bootstrap.servers": servers})
    topic = admin.list_topics(TOPIC, timeout=20).topics[TOPIC]
    return {p.id: (p.leader, sorted(p.isrs)) for p in topic.partitions.values()}


def settled(servers, live):
    """Whether every partition has a leader among `live` and exactly `live` as its ISR."""
    try:
        got = layout(servers)
    except Exception:  # noqa: BLE001  (a broker that just died may be asked first)
        return False
    return len(got) == PARTITIONS and all(leader in live and isr == sorted(live) for leader, isr in got.values())


def produce_to_every_partition(servers):
    p = Producer({"bootstrap.servers": servers, "acks": "all", "enable.idempotence": True,
                  "topic.metadata.refresh.interval.ms": 1000})
    failed = []
    for part in range(PARTITIONS):
        p.produce(TOPIC, value=b"v%d" % part, partition=part,
                  on_delivery=lambda err, msg: err is not None and failed.append((msg.partition(), err)))
        p.poll(0)
    assert p.flush(120) == 0, "records still unacknowledged after 120 s"
    assert failed == [], f"{len(failed)} partitions refused the write, first {failed[:3]}"


def test_a_broker_of_2000_partitions_dies_returns_and_stops(cluster3):
    net, nodes = cluster3
    ids = [1, 2, 3]
    servers = bootstrap(nodes)
    admin = AdminClient({"bootstrap.servers": servers})
    created = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
                                  operation_timeout=60)
    created[TOPIC].result(timeout=90)
    wait_for("all 2000 ISRs full", lambda: settled(servers, ids))

    # SIGKILL broker 1: its leaderships move to 2 and 3, and it leaves every ISR.
    nodes[0].kill()
    rest = bootstrap(nodes, without=nodes[0])
    wait_for("leaders on brokers 2 and 3, ISRs [2, 3]", lambda: settled(rest, [2, 3]))

    # It returns and catches up: 2000 ISR additions at once.
    began = time.monotonic()
    nodes[0].start(60)
    wait_for("broker 1 back in all 2000 ISRs", lambda: settled(servers, ids))
    print(f"broker 1 back in every ISR {time.monotonic() - began:.1f} s after its restart")
    produce_to_every_partition(servers)

    # A controlled shutdown of broker 2: it leaves leadership first, then exits by itself.
    led = sum(1 for leader, _ in layout(servers).values() if leader == 2)
    nodes[1].signal(signal.SIGTERM)
    nodes[1].proc.wait(timeout=60)
    assert nodes[1].proc.returncode == 0, f"broker 2 exited with {nodes[1].proc.returncode}"
    log = nodes[1].log_path.read_text(errors="replace")
    assert "controlled shutdown: leadership moved off this broker" in log, \
        f"broker 2 (leader of {led}) stopped without moving its leadership off; see {nodes[1].log_path}"
    rest = bootstrap(nodes, without=nodes[1])
    wait_for("leaders on brokers 1 and 3", lambda: settled(rest, [1, 3]))
    produce_to_every_partition(rest)


def test_700_clients_creating_topics_at_once_are_all_answered(cluster3):
    net, nodes = cluster3
    clients = 700
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < clients + 200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, clients + 1000), hard))
    conns = [kwire.Conn(nodes[0].address, timeout=120) for _ in range(clients)]
    answers = collections.Counter()
    start = threading.Barrier(clients)

    def create(i):
        start.wait()
        try:
            r = conns[i].call("CreateTopics", 7, timeout_ms=30000, topics=[{
                "name": f"fleet-{i}", "num_partitions": 1, "replication_factor": 3, "configs": []}])
            answers[r["topics"][0]["error_code"]] += 1
        except Exception as e:  # noqa: BLE001  (counted: a closed connection is a failure too)
            answers[type(e).__name__] += 1

    threads = [threading.Thread(target=create, args=(i,)) for i in range(clients)]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in conns:
        c.close()
    print(f"{clients} CreateTopics answered in {time.monotonic() - began:.1f} s: {dict(answers)}")
    assert answers == {0: clients}, f"error codes (0: created): {dict(answers)}"
