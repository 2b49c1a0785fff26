"""Differential cluster scenarios: the same client actions against a 3-node Apache Kafka 4.4
cluster and a 3-node runnel cluster, both started by the netns harness (every node a broker
and a controller voter, each system with its default timeouts; kafka_cluster.py). Each
scenario returns its observable outcome (error codes, metadata and tool-output shapes,
with node ids replaced by roles); Kafka's outcome is checked against what the scenario
states and runnel's must equal it.

Not part of `.ci/run`: every test starts two clusters (Kafka's takes ~20 s on two cores)
and waits out broker session timeouts, 2-3 minutes per test. Run by hand (root):

    cd compat-tests && CLUSTER_DIFFERENTIAL=1 RUNNEL_BIN=<runnel> FRANZ_BIN=~/.cache/runnel/bin/franz \\
        ~/.cache/runnel/venv/bin/python -m pytest -p no:cacheprovider -q cluster/test_kafka_differential.py
"""
import contextlib
import json
import os
import re
import subprocess
import time

import pytest

import netns
from cluster_fixtures import franz_bin, runnel_bin, start_cluster, start_kafka  # noqa: F401 (fixtures)
from differential import kwire
from kafka_tools import CONFIGS, PRODUCER_PERF_TEST, TOPICS, describe, run_tool

ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"  # kafka-leader-election.sh
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"  # kafka-reassign-partitions.sh
NOT_ENOUGH_REPLICAS = 19
REQUEST_TIMED_OUT = 7

why_not = netns.available()
pytestmark = [
    pytest.mark.skipif(why_not is not None, reason=why_not or ""),
    pytest.mark.skipif(os.environ.get("CLUSTER_DIFFERENTIAL") != "1",
                       reason="starts two 3-node clusters per test (minutes): set CLUSTER_DIFFERENTIAL=1"),
]


@contextlib.contextmanager
def three_nodes(system, tmp_path, runnel_bin):
    (tmp_path / system).mkdir()
    gen = (start_kafka(tmp_path / system, 3) if system == "kafka"
           else start_cluster(tmp_path / system, runnel_bin, 3))
    net, nodes = next(gen)
    try:
        yield net, nodes
    finally:
        gen.close()


def both(tmp_path, runnel_bin, scenario):
    """{system: outcome} of `scenario(net, nodes)` on a fresh cluster of each system."""
    out = {}
    for system in ("kafka", "runnel"):
        with three_nodes(system, tmp_path, runnel_bin) as (net, nodes):
            out[system] = scenario(net, nodes)
        print(f"{system}: {json.dumps(out[system], sort_keys=True)}")
    return out


def wait_for(what, check, timeout=90.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (OSError, ConnectionError) as e:
            last = e
        else:
            if last:
                return last
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


def alive(nodes):
    return [n for n in nodes if n.proc and n.proc.poll() is None]


def partition_md(nodes, topic, partition):
    """Metadata v12 of one partition as a live node sees it (None if it names no leader)."""
    with kwire.Conn(alive(nodes)[0].address) as c:
        md = c.call("Metadata", 12, topics=[{"name": topic}], allow_auto_topic_creation=False)
    t = md["topics"][0]
    for p in t["partitions"] if t["error_code"] == 0 else []:
        if p["partition_index"] == partition:
            return p
    return None


def create_rf3(nodes, topic, partitions=1, min_isr=2):
    with kwire.Conn(alive(nodes)[0].address) as c:
        r = c.call("CreateTopics", 7, timeout_ms=30000, topics=[{
            "name": topic, "num_partitions": partitions, "replication_factor": 3,
            "configs": [{"name": "min.insync.replicas", "value": str(min_isr)}]}])
    assert r["topics"][0]["error_code"] == 0, r
    for p in range(partitions):
        wait_for(f"{topic}-{p} led with 3 in sync",
                 lambda p=p: (m := partition_md(nodes, topic, p)) and m["leader_id"] >= 1
                 and len(m["isr_nodes"]) == 3 and m)


def produce_code(node, topic, partition, acks, timeout_ms):
    with kwire.Conn(node.address, timeout=timeout_ms / 1000 + 30) as c:
        r = c.call("Produce", 9, acks=acks, timeout_ms=timeout_ms, topic_data=[{
            "name": topic, "partition_data": [{"index": partition,
                                               "records": kwire.record_batch([b"v"])}]}])
    return r["responses"][0]["partition_responses"][0]["error_code"]


def controller_leader(nodes, franz):
    def ask():
        p = subprocess.run([franz, "quorum", "-brokers", ",".join(n.address for n in alive(nodes))],
                           capture_output=True, text=True, timeout=30)
        return p.returncode == 0 and json.loads(p.stdout)["leader"] >= 1 and json.loads(p.stdout)["leader"]
    return wait_for("a controller quorum leader", ask)


def describe_lines(nodes, topic):
    """kafka-topics --describe: the partition lines as {key: value} dicts."""
    proc = run_tool(TOPICS, "--bootstrap-server", ",".join(n.address for n in alive(nodes)),
                    "--describe", "--topic", topic, timeout=90)
    assert proc.returncode == 0, describe(proc)
    rows = []
    for line in proc.stdout.splitlines():
        if "Partition:" in line:
            rows.append(dict(re.match(r"\s*(\w+):\s*(.*)", f).groups() for f in line.split("\t") if ":" in f))
    return rows, proc.stdout


def ids(s):
    return [int(x) for x in s.split(",") if x]


# --------------------------------------------------------------------------- scenarios

def test_acks_all_as_followers_die(tmp_path, runnel_bin):
    """RF=3, min.insync.replicas=2. One follower killed: once it is fenced the ISR is 2 and
    acks=all is acknowledged. The second follower killed: two of three controller voters
    are gone, so nothing can shrink the ISR any more (Kafka's combined mode): the leader
    appends and waits, acks=all times out (REQUEST_TIMED_OUT) while acks=1 is still
    acknowledged. With min.insync.replicas=3 one fenced follower is enough for
    NOT_ENOUGH_REPLICAS."""
    def scenario(net, nodes):
        out = {}
        create_rf3(nodes, "t2", min_isr=2)
        create_rf3(nodes, "t3", min_isr=3)
        md = partition_md(nodes, "t2", 0)
        leader = nodes[md["leader_id"] - 1]
        followers = [nodes[i - 1] for i in md["replica_nodes"] if i != md["leader_id"]]
        md3 = partition_md(nodes, "t3", 0)
        # Kill a node that leads neither topic's partition, so both keep their leader.
        first = next(f for f in followers if f.host != f"n{md3['leader_id']}")
        first.kill()
        wait_for("the killed follower out of the ISR of t2 and t3",
                 lambda: all(int(first.host[1:]) not in partition_md(nodes, t, 0)["isr_nodes"] for t in ("t2", "t3")))
        out["isr after one down"] = len(partition_md(nodes, "t2", 0)["isr_nodes"])
        out["leader unchanged"] = partition_md(nodes, "t2", 0)["leader_id"] == md["leader_id"]
        out["acks=all, min.isr=2, one down"] = produce_code(leader, "t2", 0, -1, 5000)
        t3_leader = nodes[partition_md(nodes, "t3", 0)["leader_id"] - 1]
        out["acks=all, min.isr=3, one down"] = produce_code(t3_leader, "t3", 0, -1, 5000)
        out["acks=1, min.isr=3, one down"] = produce_code(t3_leader, "t3", 0, 1, 5000)
        second = next(f for f in followers if f is not first)
        second.kill()
        out["acks=all, min.isr=2, two down"] = produce_code(leader, "t2", 0, -1, 3000)
        out["acks=1, min.isr=2, two down"] = produce_code(leader, "t2", 0, 1, 3000)
        return out

    got = both(tmp_path, runnel_bin, scenario)
    assert got["kafka"] == {
        "isr after one down": 2, "leader unchanged": True,
        "acks=all, min.isr=2, one down": 0,
        "acks=all, min.isr=3, one down": NOT_ENOUGH_REPLICAS,
        "acks=1, min.isr=3, one down": 0,
        "acks=all, min.isr=2, two down": REQUEST_TIMED_OUT,
        "acks=1, min.isr=2, two down": 0,
    }, got
    assert got["runnel"] == got["kafka"], got


def test_acks_all_while_the_isr_shrinks_below_the_minimum(tmp_path, runnel_bin):
    """RF=3, min.insync.replicas=3. A follower is killed and an acks=all write sent to the
    leader at once, before the ISR knows: the leader appends it and waits for the dead
    follower until the controller fences it (the session timeout) and the ISR shrinks to
    two. Below the minimum the high watermark does not move (Kafka 4, KIP-966), so the
    write is never answered as safe: REQUEST_TIMED_OUT, and readers do not see it. The
    next acks=all write is refused before its append: NOT_ENOUGH_REPLICAS."""
    def scenario(net, nodes):
        out = {}
        create_rf3(nodes, "ae", min_isr=3)
        md = partition_md(nodes, "ae", 0)
        leader = nodes[md["leader_id"] - 1]
        follower = next(nodes[i - 1] for i in md["replica_nodes"] if i != md["leader_id"])
        follower.kill()
        out["acks=all while the ISR shrinks"] = produce_code(leader, "ae", 0, -1, 20000)
        out["isr after"] = len(partition_md(nodes, "ae", 0)["isr_nodes"])
        with kwire.Conn(leader.address) as c:
            r = c.call("ListOffsets", 7, replica_id=-1, isolation_level=0, topics=[{
                "name": "ae", "partitions": [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}]}])
        out["high watermark"] = r["topics"][0]["partitions"][0]["offset"]
        out["next acks=all"] = produce_code(leader, "ae", 0, -1, 5000)
        return out

    got = both(tmp_path, runnel_bin, scenario)
    assert got["kafka"] == {
        "acks=all while the ISR shrinks": REQUEST_TIMED_OUT, "isr after": 2,
        "high watermark": 0, "next acks=all": NOT_ENOUGH_REPLICAS,
    }, got
    assert got["runnel"] == got["kafka"], got


def test_leader_kill_describe_and_preferred_election(tmp_path, runnel_bin, franz_bin):
    """A partition leader (not the active controller) is killed: Metadata and
    `kafka-topics --describe` name a new leader from the ISR, the same replicas, an ISR
    without the dead broker and a higher leader epoch. It restarts and rejoins the ISR
    without leading; `kafka-leader-election --election-type PREFERRED` moves the
    leadership back, and a second run finds nothing to do."""
    topic = "lk"

    def scenario(net, nodes):
        out = {}
        create_rf3(nodes, topic, partitions=3)
        rows, _ = describe_lines(nodes, topic)
        out["describe keys"] = [list(r) for r in rows]
        out["describe before: leader is first replica, isr = replicas"] = [
            int(r["Leader"]) == ids(r["Replicas"])[0] and set(ids(r["Isr"])) == set(ids(r["Replicas"]))
            for r in rows]
        ctrl = controller_leader(nodes, franz_bin)
        mds = {p: partition_md(nodes, topic, p) for p in range(3)}
        p, md = next((p, m) for p, m in mds.items() if m["leader_id"] != ctrl)
        victim = nodes[md["leader_id"] - 1]
        victim_id = md["leader_id"]
        victim.kill()
        after = wait_for("a new leader without the victim in the ISR",
                         lambda: (m := partition_md(nodes, topic, p)) and m["leader_id"] not in (-1, victim_id)
                         and victim_id not in m["isr_nodes"] and m)
        out["new leader from the old ISR"] = after["leader_id"] in md["isr_nodes"]
        out["replicas unchanged"] = after["replica_nodes"] == md["replica_nodes"]
        out["isr = replicas - victim"] = sorted(after["isr_nodes"]) == sorted(
            i for i in md["replica_nodes"] if i != victim_id)
        out["leader epoch increased"] = after["leader_epoch"] > md["leader_epoch"]
        rows, _ = describe_lines(nodes, topic)
        row = next(r for r in rows if int(r["Partition"]) == p)
        out["describe after: leader, replicas, isr"] = [
            int(row["Leader"]) == after["leader_id"], ids(row["Replicas"]) == md["replica_nodes"],
            sorted(ids(row["Isr"])) == sorted(after["isr_nodes"])]

        victim.launch().wait_listening(90)
        wait_for("the restarted broker back in the ISR",
                 lambda: victim_id in partition_md(nodes, topic, p)["isr_nodes"], timeout=120)
        preferred = md["replica_nodes"][0]
        out["restarted broker leads before the election"] = partition_md(nodes, topic, p)["leader_id"] == preferred
        servers = ",".join(n.address for n in nodes)
        runs = []
        for _ in range(2):
            proc = run_tool(ELECTION, "--bootstrap-server", servers, "--election-type", "PREFERRED",
                            "--topic", topic, "--partition", str(p), timeout=90)
            runs.append([proc.returncode, proc.stdout.replace(f"{topic}-{p}", "T-P").strip()])
            if len(runs) == 1:
                wait_for("the preferred replica leading",
                         lambda: partition_md(nodes, topic, p)["leader_id"] == preferred, timeout=30)
        out["election runs (exit, stdout)"] = runs
        out["preferred leads after"] = partition_md(nodes, topic, p)["leader_id"] == preferred
        return out

    got = both(tmp_path, runnel_bin, scenario)
    k = got["kafka"]
    assert k["new leader from the old ISR"] and k["replicas unchanged"] and k["isr = replicas - victim"], k
    assert k["leader epoch increased"] and k["describe after: leader, replicas, isr"] == [True] * 3, k
    assert not k["restarted broker leads before the election"] and k["preferred leads after"], k
    assert k["election runs (exit, stdout)"] == [
        [0, "Successfully completed leader election (PREFERRED) for partitions T-P"],
        [0, "Valid replica already elected for partitions T-P"]], k
    assert got["runnel"] == k, got


def test_reassign_with_a_throttle(tmp_path, runnel_bin):
    """`kafka-reassign-partitions --execute --throttle 10000` moves a replica of a 6 MB
    partition to the third broker. The new replica gets a first fetch's worth and is then
    held back: 3 s after its first bytes it holds less than half, and `--verify` says the
    move is in progress. `kafka-configs --delete-config` lifts the rates on the brokers;
    the move completes and `--verify` clears the topic throttles."""
    topic = "slow"

    def log_bytes(node):
        d = node.data_dir / f"{topic}-0"
        return sum(f.stat().st_size for f in d.glob("*.log")) if d.exists() else 0

    def scenario(net, nodes):
        out = {}
        servers = ",".join(n.address for n in nodes)
        proc = run_tool(TOPICS, "--bootstrap-server", servers, "--create", "--topic", topic,
                        "--partitions", "1", "--replication-factor", "2", timeout=90)
        assert proc.returncode == 0, describe(proc)
        wait_for("the topic led", lambda: (m := partition_md(nodes, topic, 0)) and m["leader_id"] >= 1)
        proc = run_tool(PRODUCER_PERF_TEST, "--topic", topic, "--num-records", "600", "--record-size", "10000",
                        "--throughput", "-1", "--producer-props", f"bootstrap.servers={servers}", "acks=all",
                        timeout=180)
        assert proc.returncode == 0, describe(proc)
        md = partition_md(nodes, topic, 0)
        leader, replicas = md["leader_id"], md["replica_nodes"]
        outsider = ({1, 2, 3} - set(replicas)).pop()
        plan = tmp_path / f"plan-{len(list(tmp_path.glob('plan-*')))}.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [leader, outsider]}]}))
        proc = run_tool(REASSIGN, "--bootstrap-server", servers, "--reassignment-json-file", plan, "--execute",
                        "--throttle", "10000", timeout=90)
        out["execute exit"] = proc.returncode
        out["throttle line"] = "The inter-broker throttle limit was set to 10000 B/s" in proc.stdout
        full = log_bytes(nodes[leader - 1])
        wait_for("the new replica's first bytes", lambda: log_bytes(nodes[outsider - 1]) > 0)
        time.sleep(3)
        copied = log_bytes(nodes[outsider - 1])
        print(f"held back: copied {copied} of {full} bytes 3 s after the first")
        out["held back (under half copied after 3 s)"] = copied < full // 2
        proc = run_tool(REASSIGN, "--bootstrap-server", servers, "--reassignment-json-file", plan, "--verify",
                        timeout=90)
        out["verify while held"] = "Reassignment of partition slow-0 is still in progress." in proc.stdout
        for node_id in sorted(set(replicas) | {outsider}):
            proc = run_tool(CONFIGS, "--bootstrap-server", servers, "--alter", "--entity-type", "brokers",
                            "--entity-name", str(node_id), "--delete-config",
                            "leader.replication.throttled.rate,follower.replication.throttled.rate", timeout=90)
            assert proc.returncode == 0, describe(proc)
        started = time.monotonic()

        def verified():
            p = run_tool(REASSIGN, "--bootstrap-server", servers, "--reassignment-json-file", plan, "--verify",
                         timeout=90)
            return "Reassignment of partition slow-0 is completed." in p.stdout and p
        done = wait_for("the move to complete", verified, timeout=120)
        print(f"completed {time.monotonic() - started:.1f} s after the rates were lifted")
        out["verify clears topic throttles"] = "Clearing topic-level throttles on topic slow" in done.stdout
        out["new replica holds every byte"] = log_bytes(nodes[outsider - 1]) == full
        return out

    got = both(tmp_path, runnel_bin, scenario)
    k = got["kafka"]
    assert k == {"execute exit": 0, "throttle line": True, "held back (under half copied after 3 s)": True,
                 "verify while held": True, "verify clears topic throttles": True,
                 "new replica holds every byte": True}, k
    assert got["runnel"] == k, got


def test_eligible_leader_replicas_below_the_minimum(tmp_path, runnel_bin):
    """RF=3, min.insync.replicas=3, eligible leader replicas on in both (KIP-966; Kafka 4.1+
    formats new clusters with them). A follower is killed: once it is fenced the ISR is
    two, below the minimum, so the high watermark stops and the follower becomes an
    eligible leader replica (`kafka-topics --describe` lists it under Elr). Restarted, it
    catches up and rejoins the ISR: back at the minimum, the ELR is empty again."""
    topic = "elr"

    def scenario(net, nodes):
        out = {}
        create_rf3(nodes, topic, min_isr=3)
        md = partition_md(nodes, topic, 0)
        leader_id = md["leader_id"]
        victim_id = next(i for i in md["replica_nodes"] if i != leader_id)
        role = lambda i: "leader" if i == leader_id else "victim" if i == victim_id else "other"  # noqa: E731

        def state():
            rows, _ = describe_lines(nodes, topic)
            r = rows[0]
            return [sorted(role(i) for i in ids(r["Isr"])), [role(i) for i in ids(r["Elr"])],
                    [role(i) for i in ids(r["LastKnownElr"])]]

        victim = nodes[victim_id - 1]
        victim.kill()
        wait_for("the victim out of the ISR", lambda: victim_id not in partition_md(nodes, topic, 0)["isr_nodes"])
        out["below the minimum: isr, elr, last known elr"] = state()
        victim.launch().wait_listening(90)
        wait_for("the victim back in the ISR",
                 lambda: victim_id in partition_md(nodes, topic, 0)["isr_nodes"], timeout=120)
        out["back: isr, elr, last known elr"] = state()
        return out

    got = both(tmp_path, runnel_bin, scenario)
    assert got["kafka"] == {
        "below the minimum: isr, elr, last known elr": [["leader", "other"], ["victim"], []],
        "back: isr, elr, last known elr": [["leader", "other", "victim"], [], []],
    }, got
    assert got["runnel"] == got["kafka"], got
