"""Fixtures shared by the cluster tests (imported by them: a second conftest.py would
shadow the suite's own `conftest` module): the franz-go helper, the runnel binary, and
clusters of three and five brokers in network namespaces."""
import os
import subprocess
import time
from pathlib import Path

import pytest

import netns

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


@pytest.fixture(scope="session")
def franz_bin():
    path = os.environ.get("FRANZ_BIN")
    if not path:
        out = subprocess.run(["bash", str(HERE.parent / "setup" / "go.sh")], capture_output=True,
                             text=True, timeout=600)
        assert out.returncode == 0, f"setup/go.sh failed:\n{out.stderr[-3000:]}"
        path = out.stdout.strip().splitlines()[-1]
    return path


@pytest.fixture(scope="session")
def runnel_bin():
    path = os.environ.get("RUNNEL_BIN", str(REPO / "target" / "debug" / "runnel"))
    assert Path(path).exists(), f"runnel binary not found at {path}"
    return path


# ---- a replicated cluster: brokers with combined broker+controller roles -------------

CONTROLLER_PORT = 9093


def supports_cluster(binary):
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
    return "--controller-quorum-voters" in out.stdout


def start_cluster(tmp_path, runnel_bin, size, extra_args=None, voters=None):
    """`size` brokers; the first `voters` (default: all) are also controller quorum
    voters, the others broker-only nodes that follow the metadata log as learners.
    `extra_args(i, ip)` gives more flags for node i+1."""
    if not supports_cluster(runnel_bin):
        pytest.skip("this runnel has no --controller-quorum-voters (no controller quorum yet)")
    hosts = [f"n{i + 1}" for i in range(size)]
    voting = hosts[:voters or size]
    net = netns.Network(hosts + ["client"]).up()
    quorum = ",".join(f"{i + 1}@{net.ips[h]}:{CONTROLLER_PORT}" for i, h in enumerate(voting))
    nodes = [netns.Node(net, h, runnel_bin, tmp_path / h,
                        extra_args=["--node-id", i + 1,
                                    "--controller-listen", f"{net.ips[h]}:{CONTROLLER_PORT}",
                                    "--controller-quorum-voters", quorum]
                        + ([] if h in voting else ["--process-roles", "broker"])
                        + (extra_args(i, net.ips[h]) if extra_args else []))
             for i, h in enumerate(hosts)]
    try:
        for n in nodes:
            n.launch()
        for n in nodes:
            n.wait_listening(60)
        wait_registered(nodes, size, 60)
        yield net, nodes
    finally:
        # SIGKILL, not SIGTERM: the test is over, and brokers stopped together cannot
        # reach a controller quorum for their controlled shutdowns, so each would wait
        # out its timeout before exiting (seconds per test, minutes of CI).
        for n in nodes:
            n.kill()
        net.down()


def wait_for(what, check, timeout=60):
    """Poll `check()` every second until it gives something true, and return that; fail
    after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(1.0)


def produce_acked(servers, topic, values, partition=0):
    """Idempotent acks=all writes of `values` (strings) to one partition, each of which
    must be acknowledged."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": servers, "acks": "all", "enable.idempotence": True})
    for v in values:
        p.produce(topic, value=v.encode(), partition=partition)
        p.poll(0)
    assert p.flush(60) == 0


def read_values(servers, topic, count, partition=0, timeout=60):
    """Up to `count` values (strings) of one partition from its start, read until there
    are that many or `timeout` seconds pass."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": servers, "group.id": f"read-{time.time_ns()}", "enable.auto.commit": False,
                  "topic.metadata.refresh.interval.ms": 1000})
    c.assign([TopicPartition(topic, partition, 0)])
    got, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and len(got) < count:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value().decode())
    finally:
        c.close()
    return got


def wait_registered(nodes, size, timeout):
    """Until Metadata lists all `size` brokers: a broker listens before the controller
    has unfenced it, and a topic of replication factor `size` created in between is
    refused (INVALID_REPLICATION_FACTOR, "only 2 broker(s) are registered")."""
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": ",".join(n.address for n in nodes)})
    deadline = time.monotonic() + timeout
    while True:
        try:
            listed = len(admin.list_topics(timeout=5).brokers)
        except Exception:  # noqa: BLE001  (no broker answered yet)
            listed = 0
        if listed >= size:
            return
        assert time.monotonic() < deadline, f"{listed} of {size} brokers registered after {timeout} s"
        time.sleep(0.1)


@pytest.fixture
def cluster3(tmp_path, runnel_bin):
    yield from start_cluster(tmp_path, runnel_bin, 3)


@pytest.fixture
def cluster5(tmp_path, runnel_bin):
    yield from start_cluster(tmp_path, runnel_bin, 5)


def start_kafka(tmp_path, size):
    """`size` Apache Kafka 4.4 nodes (broker+controller each) in the same harness as
    `start_cluster`: namespaces n1..n<size> and a client namespace on a bridge, node i+1
    on n<i+1>:9092 (controller :9093). Yields (net, nodes); stops them (SIGKILL: the data
    is thrown away) and removes the network at the end."""
    import kafka_cluster
    hosts = [f"n{i + 1}" for i in range(size)]
    net = netns.Network(hosts + ["client"]).up()
    nodes = []
    try:
        nodes = kafka_cluster.start_kafka_cluster(net, hosts, tmp_path)
        yield net, nodes
    finally:
        kafka_cluster.stop_all(nodes, grace=0)
        net.down()
