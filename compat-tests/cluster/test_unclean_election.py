"""Unclean leader election with Kafka's own tool on a five-broker runnel cluster (five, so
that two brokers down still leave a controller quorum). A partition on L and F: F dies,
L takes 100 more records alone (acks=all with an ISR of one), then L dies too. F comes
back outside the ISR, so nothing may lead it; `kafka-leader-election --election-type
UNCLEAN` makes F the leader anyway, with only what it had: L's last 100 records are lost,
as an unclean election warns. F counts it in `unclean_leader_elections_total`. When L
returns it truncates those records away and follows F, so that once F dies in turn, L
leads with exactly F's log: offsets never name two records."""
import os
import re
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, TopicPartition

import netns
from cluster_fixtures import produce_acked, runnel_bin, start_cluster, wait_for  # noqa: F401 (pytest fixtures)
from kafka_tools import TOPICS, describe, run_tool
from test_cluster_tools import ELECTION, bootstrap, elrs, partitions

why_not = netns.available()
pytestmark = pytest.mark.skipif(why_not is not None or bool(os.environ.get("COMPAT_BOOTSTRAP")),
                                reason=why_not or "starts its own brokers")

HTTP_PORT = 9645


@pytest.fixture
def cluster5_http(tmp_path, runnel_bin):
    yield from start_cluster(tmp_path, runnel_bin, 5, lambda i, ip: ["--http-listen", f"{ip}:{HTTP_PORT}"])


def unclean_elections(net, node):
    url = f"http://{net.ips[node.host]}:{HTTP_PORT}/metrics"
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return int(re.search(r"^unclean_leader_elections_total (\d+)", text, re.M)[1])


def produce(servers, values):
    produce_acked(servers, "lossy", values)


def read_all(servers, want):
    """Every value of partition 0 from offset 0, once `want` of them arrived (and a
    second more, to see that no more come)."""
    c = Consumer({"bootstrap.servers": servers, "group.id": f"r{time.time_ns()}", "enable.auto.commit": False,
                  "topic.metadata.refresh.interval.ms": 1000})
    c.assign([TopicPartition("lossy", 0, 0)])
    got, deadline, quiet = [], time.monotonic() + 60, None
    try:
        while time.monotonic() < deadline and (quiet is None or time.monotonic() < quiet):
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append((m.offset(), m.value().decode()))
            if len(got) >= want and quiet is None:
                quiet = time.monotonic() + 1.0
    finally:
        c.close()
    return got


def test_unclean_election_loses_only_what_the_new_leader_lacked(cluster5_http):
    net, nodes = cluster5_http
    servers = bootstrap(nodes)
    proc = run_tool(TOPICS, "--bootstrap-server", servers, "--create", "--topic", "lossy",
                    "--partitions", "1", "--replication-factor", "2", timeout=60)
    assert proc.returncode == 0, describe(proc)
    first = [f"v{i}" for i in range(100)]
    produce(servers, first)
    leader, replicas, isr = wait_for("both replicas in sync", lambda: (p := partitions(servers, "lossy")[0])
                                     and len(p[2]) == 2 and p)
    l_id = leader
    f_id = next(r for r in replicas if r != l_id)
    lnode, fnode = nodes[l_id - 1], nodes[f_id - 1]

    fnode.kill()
    without_f = bootstrap(nodes, without=fnode)
    wait_for("F out of the ISR", lambda: partitions(without_f, "lossy")[0][2] == [l_id])
    produce(without_f, [f"w{i}" for i in range(100)])
    lnode.kill()
    fnode.start(60)
    others = ",".join(n.address for n in nodes if n is not lnode)
    # Once L's session expires the partition has no leader: F is back, but it is neither
    # in the ISR (now empty) nor an eligible leader replica (it left the ISR while the ISR
    # met its minimum, 1), so no clean election may pick it. L, the last leader, is.
    leader_now, _, isr_now = wait_for("L fenced", lambda: (p := partitions(others, "lossy")[0])[0] != l_id and p)
    assert (leader_now, isr_now) == (-1, []), (leader_now, isr_now)
    assert elrs(others, "lossy")[0] == ([l_id], [l_id])
    assert unclean_elections(net, fnode) == 0

    proc = run_tool(ELECTION, "--bootstrap-server", others, "--election-type", "UNCLEAN",
                    "--topic", "lossy", "--partition", "0", timeout=60)
    assert proc.returncode == 0, describe(proc)
    assert "Successfully completed leader election (UNCLEAN) for partitions lossy-0" in proc.stdout, describe(proc)
    assert partitions(others, "lossy")[0][0] == f_id
    wait_for("F counting the unclean election", lambda: unclean_elections(net, fnode) == 1)
    # F has the first 100 only: L's last 100 are lost.
    assert read_all(others, 100) == list(enumerate(first))

    produce(others, [f"x{i}" for i in range(10)])
    lnode.start(60)
    wait_for("L back in the ISR", lambda: sorted(partitions(servers, "lossy")[0][2]) == sorted([l_id, f_id]))
    assert unclean_elections(net, lnode) == 0
    fnode.kill()
    without_f = bootstrap(nodes, without=fnode)
    wait_for("L leading", lambda: partitions(without_f, "lossy")[0][0] == l_id)
    want = list(enumerate(first + [f"x{i}" for i in range(10)]))
    assert read_all(without_f, len(want)) == want
