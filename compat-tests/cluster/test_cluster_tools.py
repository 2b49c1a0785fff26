"""Kafka's own admin tools against a three-broker runnel cluster (brokers in network
namespaces, the tools in the root namespace over the bridge): `kafka-metadata-quorum`
describes the controller quorum and follows a controller failover, `kafka-topics
--describe` shows leaders, replicas and ISRs as they change, and `kafka-leader-election`
moves leadership back to the preferred replica after a broker's restart;
`kafka-reassign-partitions` moves a partition's replicas to another broker with its
records, and with `--throttle` holds the new replica's copying to the bound it sets
(dynamic broker configs, which `kafka-configs` shows and lifts); `--cancel` of a move
whose only in-sync replica is a new one waits for the topic to allow unclean election;
`kafka-cluster unregister` drops a stopped broker's registration; `kafka-metadata-quorum
add-controller` and `remove-controller` change the controller quorum's voters, and grow a
single node into a quorum of three."""
import json
import os
import re
import shutil
import subprocess
import time

import pytest

import netns
from cluster_fixtures import (  # noqa: F401 (fixtures)
    cluster3, franz_bin, produce_acked, read_values, runnel_bin, start_cluster, wait_for, wait_registered,
)
from kafka_tools import CONFIGS, PRODUCER_PERF_TEST, TOPICS, describe, run_tool
from quorum_tools import QUORUM, controller_config, meta_properties, quorum_status, replication_rows, voter_ids

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"  # kafka-reassign-partitions.sh
ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"  # kafka-leader-election.sh
CLUSTER = "org.apache.kafka.tools.ClusterTool"  # kafka-cluster.sh

why_not = netns.available()
pytestmark = pytest.mark.skipif(why_not is not None or bool(os.environ.get("COMPAT_BOOTSTRAP")),
                                reason=why_not or "starts its own brokers")


def bootstrap(nodes, without=None):
    return ",".join(n.address for n in nodes if n is not without)


def partitions(servers, topic):
    """kafka-topics --describe: {partition: (leader, replicas, isr)}; leader -1 where the
    tool says none."""
    proc = run_tool(TOPICS, "--bootstrap-server", servers, "--describe", "--topic", topic, timeout=60)
    assert proc.returncode == 0, describe(proc)
    out = {}
    for m in re.finditer(r"Partition: (\d+)\tLeader: (-?\d+|none)\tReplicas: ([\d,]+)\tIsr: ([\d,]*)",
                         proc.stdout):
        ids = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
        out[int(m[1])] = (-1 if m[2] == "none" else int(m[2]), ids(m[3]), ids(m[4]))
    return out


def elrs(servers, topic):
    """kafka-topics --describe: {partition: (Elr, LastKnownElr)}: the eligible leader
    replicas and the last known leader (KIP-966)."""
    proc = run_tool(TOPICS, "--bootstrap-server", servers, "--describe", "--topic", topic, timeout=60)
    assert proc.returncode == 0, describe(proc)
    ids = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    return {int(m[1]): (ids(m[2]), ids(m[3]))
            for m in re.finditer(r"Partition: (\d+)\t.*\tElr: ([\d,]*)\tLastKnownElr: ([\d,]*)", proc.stdout)}


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


def endpoints(servers):
    """kafka-cluster list-endpoints --include-fenced-brokers: {id: state}."""
    proc = run_tool(CLUSTER, "list-endpoints", "--bootstrap-server", servers, "--include-fenced-brokers", timeout=60)
    assert proc.returncode == 0, describe(proc)
    rows = [line.split() for line in proc.stdout.splitlines()[1:] if line.strip()]
    return {int(r[0]): r[4] for r in rows}


def test_unregister_tool_drops_a_stopped_broker_which_registers_again_when_it_returns(cluster3):
    """A broker taken out of the cluster (Kafka's UnregisterBroker): gone from the
    cluster's brokers, fenced ones included, out of every ISR and leadership; its id stays
    in the replica lists, as in Kafka. Unregistering it again is BROKER_ID_NOT_REGISTERED.
    When its process starts again it registers anew and rejoins the ISRs."""
    net, nodes = cluster3
    servers = bootstrap(nodes)
    proc = run_tool(TOPICS, "--bootstrap-server", servers, "--create", "--topic", "retired",
                    "--partitions", "3", "--replication-factor", "3", timeout=60)
    assert proc.returncode == 0, describe(proc)
    wait_for("three in-sync replicas everywhere",
             lambda: all(len(isr) == 3 for _, _, isr in partitions(servers, "retired").values()))
    gone = nodes[2]
    gone.stop()
    others = bootstrap(nodes, without=gone)
    wait_for("broker 3 fenced", lambda: endpoints(others).get(3) == "fenced")

    proc = run_tool(CLUSTER, "unregister", "--bootstrap-server", others, "--id", "3", timeout=60)
    assert proc.returncode == 0, describe(proc)
    assert "Broker 3 is no longer registered." in proc.stdout, describe(proc)
    assert endpoints(others) == {1: "unfenced", 2: "unfenced"}
    for leader, replicas, isr in partitions(others, "retired").values():
        assert leader in (1, 2) and 3 not in isr and 3 in replicas, (leader, replicas, isr)

    proc = run_tool(CLUSTER, "unregister", "--bootstrap-server", others, "--id", "3", timeout=60)
    assert proc.returncode != 0, describe(proc)
    assert "BrokerIdNotRegisteredException: Broker ID 3 is not currently registered" in proc.stderr, describe(proc)

    gone.start(60)
    wait_for("broker 3 registered again", lambda: endpoints(servers) == {1: "unfenced", 2: "unfenced", 3: "unfenced"})
    wait_for("broker 3 back in every ISR",
             lambda: all(len(isr) == 3 for _, _, isr in partitions(servers, "retired").values()))


@pytest.fixture
def voters3_learner1(tmp_path, runnel_bin):
    """Three voters (n1-n3) and a broker-only node n4 with a controller listener, which
    follows the metadata log as a learner: the nodes of a quorum about to change."""
    yield from start_cluster(tmp_path, runnel_bin, 4, voters=3)


def test_add_and_remove_controller_change_the_voters_and_the_new_set_decides(voters3_learner1, tmp_path):
    """KIP-853 with Kafka 4.4's own `kafka-metadata-quorum`: `add-controller` makes the
    broker-only node 4, a learner, a voter (its directory id read from its data dir's
    meta.properties, as for a Kafka controller); `remove-controller` makes voter 3 (which
    the flags named; it sent its directory id when it started) a learner again. Then the
    new voters decide: with 1 and 3 killed, 2 and 4 (two of the three voters) still
    create a topic, which under the first voters, 1, 2 and 3, one survivor could not."""
    net, nodes = voters3_learner1
    servers = bootstrap(nodes)
    assert voter_ids(servers) == [1, 2, 3]
    n4 = nodes[3]
    meta = meta_properties(n4)
    assert meta["node.id"] == "4" and meta["cluster.id"] and len(meta["directory.id"]) == 22, meta
    config = controller_config(net, n4, tmp_path)

    proc = run_tool(QUORUM, "--bootstrap-server", servers, "--command-config", config, "add-controller",
                    timeout=90)
    assert proc.returncode == 0, describe(proc)
    assert (f"Added controller 4 with directory id {meta['directory.id']} and endpoints: "
            f"CONTROLLER://{net.ips['n4']}:9093") in proc.stdout, describe(proc)
    wait_for("four voters", lambda: voter_ids(servers) == [1, 2, 3, 4])
    # Voters the flag named are named by their data dir's id too, once they run.
    ids = {n: meta_properties(nodes[n - 1])["directory.id"] for n in (1, 2, 3, 4)}
    wait_for("every voter named by its directory",
             lambda: {n: r["DirectoryId"] for n, r in replication_rows(servers).items()} == ids)
    static = ids[3]

    proc = run_tool(QUORUM, "--bootstrap-server", servers, "--command-config", config, "add-controller",
                    timeout=90)
    assert proc.returncode != 0 and "DuplicateVoterException" in proc.stderr, describe(proc)

    proc = run_tool(QUORUM, "--bootstrap-server", servers, "remove-controller", "--controller-id", "3",
                    "--controller-directory-id", static, timeout=90)
    assert proc.returncode == 0, describe(proc)
    assert f"Removed KRaft controller 3 with directory id {static}" in proc.stdout, describe(proc)
    wait_for("voters 1, 2 and 4", lambda: voter_ids(servers) == [1, 2, 4])
    status = quorum_status(servers)
    assert re.findall(r'"id": (\d+)', status["CurrentObservers"]) == ["3"], status
    proc = run_tool(QUORUM, "--bootstrap-server", servers, "remove-controller", "--controller-id", "3",
                    "--controller-directory-id", static, timeout=90)
    assert proc.returncode != 0 and "VoterNotFoundException" in proc.stderr, describe(proc)

    nodes[0].kill()
    nodes[2].kill()
    survivors = bootstrap([nodes[1], nodes[3]])
    proc = run_tool(TOPICS, "--bootstrap-server", survivors, "--create", "--topic", "after-the-change",
                    "--partitions", "2", "--replication-factor", "2", timeout=90)
    assert proc.returncode == 0, describe(proc)
    wait_for("the topic led by 2 and 4",
             lambda: all(leader in (2, 4) for leader, _, _ in partitions(survivors, "after-the-change").values()))


def test_a_controller_whose_disk_was_replaced_is_removed_and_added_back_under_its_new_directory(
        voters3_learner1, tmp_path):
    """KIP-853's reason for directory ids, with Kafka 4.4's `kafka-metadata-quorum`: voter
    4 loses its data dir (SIGKILL, the dir deleted, the same flags again). It comes back
    with a new directory id and says that it neither votes nor stands for election (the
    in-process test `a_voter_whose_log_was_lost_...` shows it does not). The operator's
    way out, as with Kafka: `remove-controller` with the old directory id, after which the
    node follows the log as an observer under its new one, and `add-controller` from the
    node's own config. Then the leader is killed, and the other three voters, node 4
    among them, elect a new one and create a topic."""
    net, nodes = voters3_learner1
    servers = bootstrap(nodes)
    n4 = nodes[3]
    config = controller_config(net, n4, tmp_path)
    proc = run_tool(QUORUM, "--bootstrap-server", servers, "--command-config", config, "add-controller",
                    timeout=90)
    assert proc.returncode == 0, describe(proc)
    wait_for("four voters", lambda: voter_ids(servers) == [1, 2, 3, 4])
    old = meta_properties(n4)["directory.id"]

    n4.kill()
    shutil.rmtree(n4.data_dir)
    n4.start(60)
    wait_for("node 4 back with a new data dir", lambda: "cluster.id" in meta_properties(n4))
    new = meta_properties(n4)["directory.id"]
    assert new != old
    wait_for("node 4 saying it does not vote",
             lambda: "neither votes nor stands for election" in n4.log_path.read_text(errors="replace"))
    assert replication_rows(servers)[4]["DirectoryId"] == old

    proc = run_tool(QUORUM, "--bootstrap-server", servers, "remove-controller", "--controller-id", "4",
                    "--controller-directory-id", old, timeout=90)
    assert proc.returncode == 0, describe(proc)
    assert f"Removed KRaft controller 4 with directory id {old}" in proc.stdout, describe(proc)
    wait_for("node 4 an observer under its new directory", lambda: voter_ids(servers) == [1, 2, 3]
             and replication_rows(servers)[4]["DirectoryId"] == new)
    proc = run_tool(QUORUM, "--bootstrap-server", servers, "--command-config", config, "add-controller",
                    timeout=90)
    assert proc.returncode == 0, describe(proc)
    assert f"Added controller 4 with directory id {new}" in proc.stdout, describe(proc)
    wait_for("four voters again", lambda: voter_ids(servers) == [1, 2, 3, 4])

    leader = int(quorum_status(servers)["LeaderId"])
    gone = nodes[leader - 1] if leader != 4 else nodes[0]
    gone.kill()
    survivors = bootstrap(nodes, without=gone)
    proc = run_tool(TOPICS, "--bootstrap-server", survivors, "--create", "--topic", "after-the-new-disk",
                    "--partitions", "1", "--replication-factor", "3", timeout=90)
    assert proc.returncode == 0, describe(proc)


def test_a_single_node_grows_into_a_cluster_of_three_controllers(runnel_bin, tmp_path):
    """KIP-853 from one node, as from Kafka's `--standalone` controller: a runnel started
    alone (no controller flags) takes writes; restarted with a controller listener and
    itself as the only voter, it keeps them and is a cluster of one. Two broker-only
    nodes that name it join as learners, and Kafka 4.4's `add-controller` makes each a
    voter. The first node, started alone, was named at no address: now the quorum shows
    it at its listener. Then it is killed, and the two others, two of the three voters,
    still create a topic and serve what was acknowledged on the grown cluster."""
    net = netns.Network(["n1", "n2", "n3", "client"]).up()
    ip = net.ips
    n1 = netns.Node(net, "n1", runnel_bin, tmp_path / "n1")
    nodes = [n1]
    try:
        n1.start(60)
        proc = run_tool(TOPICS, "--bootstrap-server", n1.address, "--create", "--topic", "alone",
                        "--partitions", "1", "--replication-factor", "1", timeout=90)
        assert proc.returncode == 0, describe(proc)
        produce_acked(n1.address, "alone", [f"a{i}" for i in range(100)])
        n1.stop()
        n1.extra_args = ["--node-id", "1", "--controller-listen", f"{ip['n1']}:9093",
                         "--controller-quorum-voters", f"1@{ip['n1']}:9093"]
        n1.start(60)
        assert voter_ids(n1.address) == [1]
        for i, h in ((2, "n2"), (3, "n3")):
            node = netns.Node(net, h, runnel_bin, tmp_path / h,
                              extra_args=["--node-id", i, "--process-roles", "broker",
                                          "--controller-listen", f"{ip[h]}:9093",
                                          "--controller-quorum-voters", f"1@{ip['n1']}:9093"])
            nodes.append(node)
            node.start(60)
        wait_registered(nodes, 3, 60)
        servers = bootstrap(nodes)
        for node in nodes[1:]:
            config = controller_config(net, node, tmp_path)
            proc = run_tool(QUORUM, "--bootstrap-server", servers, "--command-config", config, "add-controller",
                            timeout=90)
            assert proc.returncode == 0, describe(proc)
        wait_for("three voters", lambda: voter_ids(servers) == [1, 2, 3])
        assert f"CONTROLLER://{ip['n1']}:9093" in quorum_status(servers)["CurrentVoters"]
        assert read_values(servers, "alone", 100) == [f"a{i}" for i in range(100)]
        proc = run_tool(TOPICS, "--bootstrap-server", servers, "--create", "--topic", "grown",
                        "--partitions", "1", "--replication-factor", "3", "--config", "min.insync.replicas=2",
                        timeout=90)
        assert proc.returncode == 0, describe(proc)
        produce_acked(servers, "grown", [f"g{i}" for i in range(100)])

        n1.kill()
        survivors = bootstrap(nodes, without=n1)
        proc = run_tool(TOPICS, "--bootstrap-server", survivors, "--create", "--topic", "without-1",
                        "--partitions", "1", "--replication-factor", "2", timeout=90)
        assert proc.returncode == 0, describe(proc)
        assert read_values(survivors, "grown", 100) == [f"g{i}" for i in range(100)]
    finally:
        for n in nodes:
            n.kill()
        net.down()


def test_reassign_partitions_tool_moves_a_replica_with_its_records(cluster3, franz_bin, tmp_path):
    net, nodes = cluster3
    servers = bootstrap(nodes)
    proc = run_tool(TOPICS, "--bootstrap-server", servers, "--create", "--topic", "moved",
                    "--partitions", "1", "--replication-factor", "2", timeout=60)
    assert proc.returncode == 0, describe(proc)
    out = subprocess.run([franz_bin, "produce", "-brokers", servers, "-topic", "moved", "-n", "500",
                          "-create=false"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    _, replicas, _ = partitions(servers, "moved")[0]
    outsider = ({1, 2, 3} - set(replicas)).pop()
    leaving = replicas[0]
    target = [outsider, replicas[1]]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "moved", "partition": 0, "replicas": target}]}))

    proc = run_tool(REASSIGN, "--bootstrap-server", servers, "--reassignment-json-file", plan, "--execute",
                    timeout=60)
    assert proc.returncode == 0, describe(proc)
    assert "Successfully started partition reassignment for moved-0" in proc.stdout, describe(proc)

    def verified():
        p = run_tool(REASSIGN, "--bootstrap-server", servers, "--reassignment-json-file", plan, "--verify",
                     timeout=60)
        return p.returncode == 0 and "Reassignment of partition moved-0 is completed." in p.stdout and p
    wait_for("the reassignment to complete", verified)
    leader, replicas, isr = partitions(servers, "moved")[0]
    assert (sorted(replicas), sorted(isr)) == (sorted(target), sorted(target)), (leader, replicas, isr)
    # The old leader left; leadership went to the first target replica in the ISR.
    assert leader == target[0], (leader, replicas, isr)
    # The replica that left deleted its copy; the records are all there.
    wait_for("the old replica's copy deleted", lambda: not (nodes[leaving - 1].data_dir / "moved-0").exists())
    out = subprocess.run([franz_bin, "consume", "-brokers", servers, "-topic", "moved", "-n", "500"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert len(out.stdout.splitlines()) == 500, out.stdout[-2000:]


def log_bytes(node, partition_dir):
    """The bytes of a replica's segment files."""
    d = node.data_dir / partition_dir
    return sum(f.stat().st_size for f in d.glob("*.log")) if d.exists() else 0


def create_6mb_topic(servers, topic, replication_factor):
    """A one-partition topic holding 6 MB: far more than the one fetch (1 MiB) a
    throttled replica gets before a 10 kB/s quota (measured over up to 11 s) holds it
    back."""
    proc = run_tool(TOPICS, "--bootstrap-server", servers, "--create", "--topic", topic,
                    "--partitions", "1", "--replication-factor", str(replication_factor), timeout=60)
    assert proc.returncode == 0, describe(proc)
    proc = run_tool(PRODUCER_PERF_TEST, "--topic", topic, "--num-records", "600", "--record-size", "10000",
                    "--throughput", "-1", "--producer-props", f"bootstrap.servers={servers}", "acks=all",
                    timeout=120)
    assert proc.returncode == 0, describe(proc)


def test_reassign_with_a_throttle_holds_the_new_replica_back_until_the_throttle_is_lifted(cluster3, tmp_path):
    net, nodes = cluster3
    servers = bootstrap(nodes)
    create_6mb_topic(servers, "slow", 2)
    leader, replicas, _ = partitions(servers, "slow")[0]
    outsider = ({1, 2, 3} - set(replicas)).pop()
    plan = tmp_path / "plan.json"
    target = [leader, outsider]
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "slow", "partition": 0, "replicas": target}]}))

    proc = run_tool(REASSIGN, "--bootstrap-server", servers, "--reassignment-json-file", plan, "--execute",
                    "--throttle", "10000", timeout=60)
    assert proc.returncode == 0, describe(proc)
    assert "The inter-broker throttle limit was set to 10000 B/s" in proc.stdout, describe(proc)
    assert "Successfully started partition reassignment for slow-0" in proc.stdout, describe(proc)
    # The tool set the rates on each broker of the move, and the throttled replicas on the topic.
    for node_id in sorted(set(replicas) | {outsider}):
        proc = run_tool(CONFIGS, "--bootstrap-server", servers, "--describe", "--entity-type", "brokers",
                        "--entity-name", str(node_id), timeout=60)
        assert proc.returncode == 0, describe(proc)
        for side in ("leader", "follower"):
            assert f"{side}.replication.throttled.rate=10000 sensitive=false" in proc.stdout, describe(proc)
    proc = run_tool(CONFIGS, "--bootstrap-server", servers, "--describe", "--entity-type", "topics",
                    "--entity-name", "slow", timeout=60)
    assert f"follower.replication.throttled.replicas=0:{outsider}" in proc.stdout, describe(proc)
    sources = ",".join(sorted(f"0:{r}" for r in replicas))
    assert f"leader.replication.throttled.replicas={sources} " in proc.stdout, describe(proc)

    # The new replica gets a first fetch's worth and is then held back.
    full = log_bytes(nodes[leader - 1], "slow-0")
    assert full >= 6_000_000, full
    wait_for("the new replica's first records", lambda: log_bytes(nodes[outsider - 1], "slow-0") > 0)
    time.sleep(3)
    copied = log_bytes(nodes[outsider - 1], "slow-0")
    assert copied < full // 2, f"the throttled replica copied {copied} of {full} bytes"
    proc = run_tool(REASSIGN, "--bootstrap-server", servers, "--reassignment-json-file", plan, "--verify",
                    timeout=60)
    assert "Reassignment of partition slow-0 is still in progress." in proc.stdout, describe(proc)

    # The operator lifts the throttle on the brokers: the move completes, and --verify
    # clears the throttled replicas from the topic.
    for node_id in sorted(set(replicas) | {outsider}):
        proc = run_tool(CONFIGS, "--bootstrap-server", servers, "--alter", "--entity-type", "brokers",
                        "--entity-name", str(node_id), "--delete-config",
                        "leader.replication.throttled.rate,follower.replication.throttled.rate", timeout=60)
        assert proc.returncode == 0, describe(proc)

    def verified():
        p = run_tool(REASSIGN, "--bootstrap-server", servers, "--reassignment-json-file", plan, "--verify",
                     timeout=60)
        return p.returncode == 0 and "Reassignment of partition slow-0 is completed." in p.stdout and p
    done = wait_for("the reassignment to complete", verified)
    assert "Clearing topic-level throttles on topic slow" in done.stdout, describe(done)
    proc = run_tool(CONFIGS, "--bootstrap-server", servers, "--describe", "--entity-type", "topics",
                    "--entity-name", "slow", timeout=60)
    assert "throttled.replicas" not in proc.stdout, describe(proc)
    assert log_bytes(nodes[outsider - 1], "slow-0") == full


def test_cancel_that_needs_an_unclean_election_waits_for_the_topic_to_allow_it(cluster3, franz_bin, tmp_path):
    """A move from A to [B, C] where B caught up and C is held back by a throttle; A dies,
    so only B, a replica being added, is in sync. Going back to [A] would take B out and
    elect A from outside the ISR: `--cancel` is refused until the topic allows unclean
    election, as in Kafka, and then A alone is the ISR and leads again once it is back."""
    net, nodes = cluster3
    servers = bootstrap(nodes)
    create_6mb_topic(servers, "revert", 1)
    a = partitions(servers, "revert")[0][1][0]
    b, c = sorted({1, 2, 3} - {a})
    # C copies at 10 kB/s (6 MB to go); B is not throttled.
    for args in (("brokers", str(c), "follower.replication.throttled.rate=10000"),
                 ("topics", "revert", f"follower.replication.throttled.replicas=[0:{c}]")):
        proc = run_tool(CONFIGS, "--bootstrap-server", servers, "--alter", "--entity-type", args[0],
                        "--entity-name", args[1], "--add-config", args[2], timeout=60)
        assert proc.returncode == 0, describe(proc)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "revert", "partition": 0, "replicas": [b, c]}]}))
    proc = run_tool(REASSIGN, "--bootstrap-server", servers, "--reassignment-json-file", plan, "--execute",
                    timeout=60)
    assert proc.returncode == 0, describe(proc)
    wait_for("B in the ISR", lambda: b in partitions(servers, "revert")[0][2])

    nodes[a - 1].kill()
    others = bootstrap(nodes, without=nodes[a - 1])
    leader, replicas, isr = wait_for("B the ISR alone", lambda: (p := partitions(others, "revert")[0])[2] == [b] and p)
    assert (leader, sorted(replicas)) == (b, [1, 2, 3]), (leader, replicas, isr)

    def cancel():
        return run_tool(REASSIGN, "--bootstrap-server", others, "--reassignment-json-file", plan, "--cancel",
                        timeout=60)
    proc = cancel()
    assert proc.returncode != 0, describe(proc)
    assert "Error cancelling partition reassignment for:" in proc.stdout + proc.stderr, describe(proc)
    assert "unclean" in proc.stdout + proc.stderr, describe(proc)
    assert partitions(others, "revert")[0] == (leader, replicas, isr), "the refused cancel changed nothing"

    proc = run_tool(CONFIGS, "--bootstrap-server", others, "--alter", "--entity-type", "topics",
                    "--entity-name", "revert", "--add-config", "unclean.leader.election.enable=true", timeout=60)
    assert proc.returncode == 0, describe(proc)
    proc = cancel()
    assert proc.returncode == 0, describe(proc)
    assert "Successfully cancelled partition reassignment for: revert-0" in proc.stdout, describe(proc)

    nodes[a - 1].start(60)
    wait_for("A leading alone", lambda: partitions(servers, "revert")[0] == (a, [a], [a]))
    out = subprocess.run([franz_bin, "consume", "-brokers", servers, "-topic", "revert", "-n", "600"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert len(out.stdout.splitlines()) == 600, out.stdout[-2000:]
