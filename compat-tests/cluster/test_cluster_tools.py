"""Kafka's own admin tools against a three-broker runnel cluster (brokers in network
namespaces, the tools in the root namespace over the bridge): `kafka-metadata-quorum`
describes the controller quorum and follows a controller failover, `kafka-topics
--describe` shows leaders, replicas and ISRs as they change, and `kafka-leader-election`
moves leadership back to the preferred replica after a broker's restart."""
import os
import re
import time

import pytest

import netns
from cluster_fixtures import cluster3, runnel_bin  # noqa: F401 (pytest fixtures)
from kafka_tools import TOPICS, describe, run_tool

QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"   # kafka-metadata-quorum.sh
ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"  # kafka-leader-election.sh

why_not = netns.available()
pytestmark = pytest.mark.skipif(why_not is not None or bool(os.environ.get("COMPAT_BOOTSTRAP")),
                                reason=why_not or "starts its own brokers")


def bootstrap(nodes, without=None):
    return ",".join(n.address for n in nodes if n is not without)


def quorum_status(servers):
    """kafka-metadata-quorum describe --status, as a dict of its `Key: value` lines."""
    proc = run_tool(QUORUM, "--bootstrap-server", servers, "describe", "--status", timeout=60)
    assert proc.returncode == 0, describe(proc)
    return dict(re.match(r"(\w+):\s+(.*)", line).groups() for line in proc.stdout.splitlines() if ":" in line)


def partitions(servers, topic):
    """kafka-topics --describe: {partition: (leader, replicas, isr)}."""
    proc = run_tool(TOPICS, "--bootstrap-server", servers, "--describe", "--topic", topic, timeout=60)
    assert proc.returncode == 0, describe(proc)
    out = {}
    for m in re.finditer(r"Partition: (\d+)\tLeader: (-?\d+)\tReplicas: ([\d,]+)\tIsr: ([\d,]*)", proc.stdout):
        ids = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
        out[int(m[1])] = (int(m[2]), ids(m[3]), ids(m[4]))
    return out


def wait_for(what, check, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(1.0)


def test_quorum_topics_and_leader_election_tools(cluster3):
    net, nodes = cluster3
    servers = bootstrap(nodes)

    status = quorum_status(servers)
    leader = int(status["LeaderId"])
    assert leader in (1, 2, 3), status
    voters = [int(v) for v in re.findall(r'"id": (\d+)', status["CurrentVoters"])]
    assert sorted(voters) == [1, 2, 3], status
    assert "CONTROLLER://" in status["CurrentVoters"], status
    proc = run_tool(QUORUM, "--bootstrap-server", servers, "describe", "--replication", timeout=60)
    assert proc.returncode == 0, describe(proc)
    rows = [line.split() for line in proc.stdout.splitlines()[1:] if line.strip()]
    assert sorted(int(r[0]) for r in rows) == [1, 2, 3], proc.stdout
    assert [r[-1] for r in rows].count("Leader") == 1, proc.stdout

    proc = run_tool(TOPICS, "--bootstrap-server", servers, "--create", "--topic", "tools",
                    "--partitions", "3", "--replication-factor", "3", timeout=60)
    assert proc.returncode == 0, describe(proc)
    parts = wait_for("three in-sync replicas everywhere",
                     lambda: (p := partitions(servers, "tools")) and
                     all(len(isr) == 3 for _, _, isr in p.values()) and p)
    preferred, replicas, _ = parts[0]
    assert preferred == replicas[0], parts
    assert sorted(leader for leader, _, _ in parts.values()) == [1, 2, 3], parts

    # The preferred leader of partition 0 stops (SIGTERM: leadership moves off first).
    node = nodes[preferred - 1]
    node.stop()
    others = bootstrap(nodes, without=node)
    moved = wait_for("partition 0 led by another broker",
                     lambda: (p := partitions(others, "tools")[0]) and p[0] not in (preferred, -1) and p)
    assert preferred not in moved[2], moved
    node.start(60)
    wait_for("the restarted broker back in the ISR", lambda: len(partitions(servers, "tools")[0][2]) == 3)
    assert partitions(servers, "tools")[0][0] != preferred, "nothing moves leadership back by itself"

    proc = run_tool(ELECTION, "--bootstrap-server", servers, "--election-type", "PREFERRED",
                    "--all-topic-partitions", timeout=60)
    assert proc.returncode == 0, describe(proc)
    assert "Successfully completed leader election (PREFERRED) for partitions" in proc.stdout, describe(proc)
    assert "tools-0" in proc.stdout, describe(proc)
    assert partitions(servers, "tools")[0][0] == preferred
    proc = run_tool(ELECTION, "--bootstrap-server", servers, "--election-type", "PREFERRED",
                    "--topic", "tools", "--partition", "0", timeout=60)
    assert "Valid replica already elected for partitions tools-0" in proc.stdout, describe(proc)

    # The controller quorum leader dies: the others elect a new one, which the tool shows;
    # the old one comes back as a follower and catches up.
    status = quorum_status(servers)
    old = int(status["LeaderId"])
    nodes[old - 1].kill()
    others = bootstrap(nodes, without=nodes[old - 1])
    new = wait_for("a new quorum leader",
                   lambda: (s := quorum_status(others)) and int(s["LeaderId"]) not in (old, -1) and s)
    assert int(new["LeaderEpoch"]) > int(status["LeaderEpoch"]), (status, new)
    nodes[old - 1].start(60)
    wait_for("every voter caught up", lambda: quorum_status(servers)["MaxFollowerLag"] == "0")
