"""Eligible leader replicas (KIP-966, on by default in Kafka 4.1+) on a five-broker runnel
cluster whose controller quorum is three of them (so that the replicas' three brokers
down still leave a quorum), seen through Kafka's own `kafka-topics --describe` (its Elr
and LastKnownElr columns).

A partition on L, F and G with min.insync.replicas=2: G is killed (the ISR keeps its
minimum, so no ELR), F is stopped cleanly (SIGTERM: the ISR falls to L alone, below the
minimum, so the high watermark stops and F becomes an eligible leader replica), then L
is killed. Nothing in the ISR is left. F starts again after its clean shutdown, keeps its
place in the ELR, and leads: a clean election, with every acknowledged record. Before
ELR the partition had no leader until L came back. L, back after a crash (no clean
shutdown), is no longer eligible. Once G is back in the ISR the minimum is met again and
every acknowledged record is read.

`kafka-features downgrade --feature eligible.leader.replicas.version=0` turns ELR off, and
`upgrade` back on: the last test."""
import os

import pytest
from confluent_kafka import Producer

import netns
from cluster_fixtures import produce_acked, read_values, runnel_bin, start_cluster, wait_for  # noqa: F401 (pytest fixtures)
from kafka_tools import TOPICS, describe, run_tool
from test_admin_tools import feature_rows, features
from test_cluster_tools import bootstrap, elrs, endpoints, partitions

why_not = netns.available()
pytestmark = pytest.mark.skipif(why_not is not None or bool(os.environ.get("COMPAT_BOOTSTRAP")),
                                reason=why_not or "starts its own brokers")


@pytest.fixture
def cluster5_3_voters(tmp_path, runnel_bin):
    yield from start_cluster(tmp_path, runnel_bin, 5, voters=3)


def produce(servers, values):
    produce_acked(servers, "elr", values)


def test_a_cleanly_stopped_replica_outside_the_isr_leads_when_the_isr_is_gone(cluster5_3_voters):
    net, nodes = cluster5_3_voters
    servers = bootstrap(nodes)
    # L and F are broker-only nodes, G a controller voter too.
    l_id, f_id, g_id = 4, 5, 3
    lnode, fnode, gnode = (nodes[i - 1] for i in (l_id, f_id, g_id))
    proc = run_tool(TOPICS, "--bootstrap-server", servers, "--create", "--topic", "elr",
                    "--replica-assignment", f"{l_id}:{f_id}:{g_id}", "--config", "min.insync.replicas=2",
                    timeout=60)
    assert proc.returncode == 0, describe(proc)
    acknowledged = [f"v{i}" for i in range(200)]
    produce(servers, acknowledged)
    wait_for("all three in sync", lambda: sorted(partitions(servers, "elr")[0][2]) == [3, 4, 5])

    gnode.kill()
    wait_for("G out of the ISR", lambda: sorted(partitions(bootstrap(nodes, gnode), "elr")[0][2]) == [l_id, f_id])
    assert elrs(bootstrap(nodes, gnode), "elr")[0] == ([], []), "the ISR is at its minimum: no ELR"
    fnode.stop()
    rest = ",".join(n.address for n in nodes if n not in (fnode, gnode))
    wait_for("F out of the ISR", lambda: partitions(rest, "elr")[0][2] == [l_id])
    assert elrs(rest, "elr")[0] == ([f_id], []), "below the minimum: F is eligible"
    # acks=all is refused now (NOT_ENOUGH_REPLICAS): nothing more is acknowledged.
    errors = []
    p = Producer({"bootstrap.servers": rest, "acks": "all", "message.timeout.ms": 3000})
    p.produce("elr", value=b"refused", partition=0, on_delivery=lambda err, _: errors.append(err))
    p.flush(10)
    assert errors and errors[0] is not None, f"an acks=all write below the minimum was acknowledged: {errors}"

    lnode.kill()
    survivors = ",".join(n.address for n in nodes[:2])
    leader, _, isr = wait_for("L fenced", lambda: (p := partitions(survivors, "elr")[0])[0] != l_id and p)
    assert (leader, isr) == (-1, []), (leader, isr)
    assert elrs(survivors, "elr")[0] == ([f_id, l_id] if f_id < l_id else [l_id, f_id], [l_id])

    # F is back after a clean shutdown: still eligible, so it leads, with everything.
    fnode.start(60)
    wait_for("F leading", lambda: partitions(survivors, "elr")[0][:3:2] == (f_id, [f_id]))
    assert elrs(survivors, "elr")[0] == ([l_id], [])
    # L is back after a crash: its log may lack what it had, so it leaves the ELR.
    lnode.start(60)
    wait_for("L out of the ELR", lambda: elrs(survivors, "elr")[0] == ([], []))

    gnode.start(60)
    wait_for("back to the minimum", lambda: len(partitions(servers, "elr")[0][2]) >= 2)
    produce(servers, ["after"])
    assert read_values(servers, "elr", len(acknowledged) + 1) == acknowledged + ["after"]


def two_replicas_in_sync(nodes):
    """Topic `elr`, one partition on brokers 4 and 5 with min.insync.replicas=2, holding
    "a" and "b" acknowledged by both: the bootstrap string."""
    servers = bootstrap(nodes)
    proc = run_tool(TOPICS, "--bootstrap-server", servers, "--create", "--topic", "elr",
                    "--replica-assignment", "4:5", "--config", "min.insync.replicas=2", timeout=60)
    assert proc.returncode == 0, describe(proc)
    produce(servers, ["a", "b"])
    wait_for("both in sync", lambda: sorted(partitions(servers, "elr")[0][2]) == [4, 5])
    return servers


def test_without_a_clean_shutdown_the_last_leader_returns(cluster5_3_voters):
    """An ISR of one, leader L (4): L crashes after F (5) did. With nothing else eligible,
    L leads again when it returns (the last known leader), with what it has, as before
    ELR; F, back first, is neither eligible nor the last leader."""
    net, nodes = cluster5_3_voters
    servers = two_replicas_in_sync(nodes)
    lnode, fnode = nodes[3], nodes[4]
    fnode.kill()
    others = bootstrap(nodes, fnode)
    wait_for("F out of the ISR", lambda: partitions(others, "elr")[0][2] == [4])
    assert elrs(others, "elr")[0] == ([5], [])
    lnode.kill()
    survivors = ",".join(n.address for n in nodes[:3])
    wait_for("L fenced", lambda: partitions(survivors, "elr")[0][:3:2] == (-1, []))
    assert elrs(survivors, "elr")[0] == ([4, 5], [4])
    fnode.start(60)
    # F crashed: no longer eligible, and it was not the last leader.
    wait_for("F out of the ELR", lambda: elrs(survivors, "elr")[0] == ([4], [4]))
    assert partitions(survivors, "elr")[0][0] == -1
    lnode.start(60)
    wait_for("L leading", lambda: partitions(servers, "elr")[0][0] == 4)
    wait_for("F back in the ISR", lambda: sorted(partitions(servers, "elr")[0][2]) == [4, 5])
    produce(servers, ["c"])
    assert read_values(servers, "elr", 3) == ["a", "b", "c"]


ELR = "eligible.leader.replicas.version"


def test_turned_off_the_isr_keeps_its_last_member_and_turned_on_again_replicas_are_eligible(cluster5_3_voters):
    """A partition on L (4) and F (5) with min.insync.replicas=2: F stops cleanly, then L
    is killed, so the ISR is empty, both are eligible and L was the last leader. Turned off,
    the partition goes back to what the ISR kept before ELR: L. So F, back first, does not
    lead; L does when it returns, with every acknowledged record. While off, F stopping
    leaves the ISR at L alone and makes no one eligible; turned on again, it makes F
    eligible."""
    net, nodes = cluster5_3_voters
    servers = two_replicas_in_sync(nodes)
    lnode, fnode = nodes[3], nodes[4]
    others = bootstrap(nodes, fnode)
    fnode.stop()
    wait_for("F out of the ISR", lambda: partitions(others, "elr")[0][2] == [4])
    lnode.kill()
    survivors = ",".join(n.address for n in nodes[:3])
    wait_for("L fenced", lambda: partitions(survivors, "elr")[0][:3:2] == (-1, []))
    assert elrs(survivors, "elr")[0] == ([4, 5], [4])

    proc = features(survivors, "downgrade", "--feature", f"{ELR}=0")
    assert proc.returncode == 0 and proc.stdout == f"{ELR} was downgraded to 0.\n", describe(proc)
    assert feature_rows(features(survivors, "describe").stdout)[ELR]["FinalizedVersionLevel"] == "0"
    assert partitions(survivors, "elr")[0][:3:2] == (-1, [4])
    assert elrs(survivors, "elr")[0] == ([], [])
    fnode.start(60)
    wait_for("F unfenced", lambda: endpoints(survivors).get(5) == "unfenced")
    assert partitions(survivors, "elr")[0][:3:2] == (-1, [4]), "F is not in the ISR: it may not lead"
    lnode.start(60)
    wait_for("L leading", lambda: partitions(servers, "elr")[0][0] == 4)
    wait_for("F back in the ISR", lambda: sorted(partitions(servers, "elr")[0][2]) == [4, 5])
    produce(servers, ["c"])
    assert read_values(servers, "elr", 3) == ["a", "b", "c"]

    fnode.stop()
    wait_for("F out of the ISR", lambda: partitions(others, "elr")[0][2] == [4])
    assert elrs(others, "elr")[0] == ([], []), "off: no one is eligible"
    proc = features(others, "upgrade", "--feature", f"{ELR}=1")
    assert proc.returncode == 0 and proc.stdout == f"{ELR} was upgraded to 1.\n", describe(proc)
    fnode.start(60)
    wait_for("F back in the ISR", lambda: sorted(partitions(servers, "elr")[0][2]) == [4, 5])
    fnode.stop()
    wait_for("F out of the ISR", lambda: partitions(others, "elr")[0][2] == [4])
    assert elrs(others, "elr")[0] == ([5], []), "on again: F is eligible"
